import {stat} from 'node:fs/promises'

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
  return new Date(1000 * (before === null ? nowSeconds : Math.max(nowSeconds, before + 1)))
}
