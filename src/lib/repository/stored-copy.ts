import {createHash} from 'node:crypto'
import {constants, createReadStream} from 'node:fs'
import {type FileHandle, open} from 'node:fs/promises'

import {describeFsError} from '../errors.js'

/** How the repository holds a file its index lists: as listed, missing, or changed (another size or sha256, not a regular file). */
export type StoredCopy = 'intact' | 'missing' | 'changed'

const CHUNK = 1024 * 1024

/**
 * Checks the repository's copy of a file against its index entry: its size first, then its
 * sha256, read as a stream (an archive can be large). A link, a directory or a FIFO in its
 * place is `changed` (never followed, never waited on); publish writes the file again.
 */
export async function checkStoredCopy(path: string, expected: {size: number; sha256: string}): Promise<StoredCopy> {
  let handle: FileHandle
  try {
    handle = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK)
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === 'ENOENT' || code === 'ENOTDIR') return 'missing'
    if (code === 'ELOOP') return 'changed'
    throw describeFsError(error, path)
  }

  try {
    const info = await handle.stat()
    if (!info.isFile() || info.size !== expected.size) return 'changed'
    return (await sha256Of(handle.createReadStream({highWaterMark: CHUNK, autoClose: false}))) === expected.sha256 ? 'intact' : 'changed'
  } catch (error) {
    throw describeFsError(error, path)
  } finally {
    await handle.close()
  }
}

/** The sha256 of a file, read as a stream. */
export function sha256OfFile(path: string): Promise<string> {
  return sha256Of(createReadStream(path, {highWaterMark: CHUNK}))
}

async function sha256Of(stream: AsyncIterable<Buffer>): Promise<string> {
  const hash = createHash('sha256')
  for await (const chunk of stream) hash.update(chunk)
  return hash.digest('hex')
}
