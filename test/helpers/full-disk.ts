import {execFileSync} from 'node:child_process'
import {mkdtemp, rm, statfs, writeFile} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'

import type {ExecutionContext} from 'ava'

/**
 * A small tmpfs (root only), unmounted when the test ends; `fill()` fills it to the last
 * byte with a file named `filler`, so the next write fails with ENOSPC.
 */
export async function smallFileSystem(t: ExecutionContext, sizeKb = 64): Promise<{mount: string; fill: () => Promise<void>}> {
  const mount = await mkdtemp(join(tmpdir(), 'localpuppet-tmpfs-'))
  execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${sizeKb}k,mode=0755`, 'tmpfs', mount])
  t.teardown(async () => {
    execFileSync('umount', ['-l', mount])
    await rm(mount, {recursive: true, force: true})
  })
  return {mount, fill: () => writeFile(join(mount, 'filler'), Buffer.alloc(sizeKb * 1024)).catch(() => {})}
}

/** Fills a file system but for about `kb` KiB (a file named `filler2`): small writes still fit, a large one does not. */
export async function fillLeaving(mount: string, kb: number): Promise<void> {
  const {bavail, bsize} = await statfs(mount)
  await writeFile(join(mount, 'filler2'), Buffer.alloc(Math.max(0, bavail * bsize - kb * 1024)))
}
