import {randomBytes} from 'node:crypto'
import {open, rename, unlink} from 'node:fs/promises'
import {basename, dirname, join} from 'node:path'

/**
 * Writes a file so that a reader sees either the old content or the new, never half:
 * a temporary file in the same directory, flushed to disk, then renamed over the target.
 * `owner`: given to the temporary file through its descriptor before the rename, never
 * by path afterwards (a path can have become a link to a file of someone's choosing).
 */
export async function writeFileAtomic(path: string, data: string | Uint8Array, mode = 0o600, owner?: {uid: number; gid: number}): Promise<void> {
  const temp = join(dirname(path), `.${basename(path)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`)
  const handle = await open(temp, 'wx', mode)
  try {
    if (owner) await handle.chown(owner.uid, owner.gid).catch(() => {})
    await handle.writeFile(data)
    await handle.sync()
  } catch (error) {
    await handle.close()
    await unlink(temp).catch(() => {})
    throw error
  }

  await handle.close()
  try {
    await rename(temp, path)
  } catch (error) {
    await unlink(temp).catch(() => {})
    throw error
  }
}
