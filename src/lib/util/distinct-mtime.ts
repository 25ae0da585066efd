import type {FileHandle} from 'node:fs/promises'
import {stat} from 'node:fs/promises'

/** The latest time a JavaScript Date holds, in seconds: a file stamped later (a broken clock) starts again at now. */
const MAX_DATE_SECONDS = 8.64e12

/**
 * The modification time to give a file about to be renamed over `path`: whole seconds,
 * now, or one second past the file it replaces if that is later. A static web server's
 * validators have one-second resolution (nginx's ETag is "<mtime hex>-<size hex>", every
 * server's Last-Modified is in seconds) and a rewritten document often keeps its size, so
 * without this two writes within one second look the same: a node that read the first is
 * answered 304 for the second, for good (src/lib/conditional/README.md).
 */
export async function distinctMtime(path: string, now = Date.now()): Promise<Date> {
  const nowSeconds = Math.floor(now / 1000)
  const before = await stat(path).then(
    (info) => Math.floor(info.mtimeMs / 1000),
    () => null,
  )
  return new Date(1000 * (before === null || before + 1 > MAX_DATE_SECONDS ? nowSeconds : Math.max(nowSeconds, before + 1)))
}

/**
 * Stamps an open file with `mtime` (distinctMtime's). A filesystem stores times up to a
 * limit and silently keeps the limit for anything later (ext4: 2446, with small inodes
 * 2038): a file stamped there by a broken clock would get the same mtime on every write,
 * and nodes 304 for good. Then the file is stamped now, which differs from the limit.
 */
export async function stampMtime(handle: FileHandle, mtime: Date, now = Date.now()): Promise<void> {
  await handle.utimes(mtime, mtime)
  if (Math.floor((await handle.stat()).mtimeMs / 1000) === mtime.getTime() / 1000) return
  const at = new Date(1000 * Math.floor(now / 1000))
  await handle.utimes(at, at)
}
