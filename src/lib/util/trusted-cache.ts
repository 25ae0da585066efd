import {constants, type Stats} from 'node:fs'
import {open} from 'node:fs/promises'

/**
 * A cache file's bytes, only when it can be believed: a regular file (not a link, a FIFO
 * never waited on), at most `maxBytes`, that `trusted` accepts (its owner and mode), and
 * `parse` makes something of. Anything else, or any failure, is null: the caller asks
 * again, as if there were no cache. Never throws.
 */
export async function readTrustedCache<T>(path: string, maxBytes: number, trusted: (info: Stats) => boolean, parse: (bytes: Buffer) => T | null): Promise<T | null> {
  let handle
  try {
    handle = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK)
  } catch {
    return null
  }

  try {
    const info = await handle.stat()
    if (!info.isFile() || info.size > maxBytes || !trusted(info)) return null
    return parse(await handle.readFile())
  } catch {
    return null
  } finally {
    await handle.close()
  }
}
