import {execFileSync} from 'node:child_process'
import {mkdtemp, rm, writeFile} from 'node:fs/promises'
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
