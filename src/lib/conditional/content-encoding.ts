import type {Readable} from 'node:stream'
import {createGunzip} from 'node:zlib'

import {ReleaseError} from '../errors.js'
import {readBounded} from '../util/bounded-read.js'
import {terminalText} from '../util/terminal-text.js'

/** What a node asks for on the small files it reads whole (index, signature, inputs, layers). */
export const ACCEPT_ENCODING = 'gzip'

/**
 * A body read whole as its Content-Encoding says: as it is (identity), or gunzipped with
 * the output bounded to `maxBytes`, so a gzip bomb is refused (65) like an oversized
 * answer, the moment its output passes the bound, never inflated in memory. Any other
 * coding was not asked for (65). Gzip that does not decode is 65 too; the network's
 * faults (a reset mid-body) keep their own error, for the caller's retries.
 */
export async function readDecoded(body: Readable, contentEncoding: string | string[] | undefined, where: string, maxBytes: number): Promise<Buffer> {
  const coding = (Array.isArray(contentEncoding) ? contentEncoding.join(',') : (contentEncoding ?? '')).trim().toLowerCase()
  if (coding === '' || coding === 'identity') return readBounded(body, where, maxBytes)
  if (coding !== 'gzip' && coding !== 'x-gzip') {
    body.destroy()
    throw new ReleaseError(`${where}: Content-Encoding ${terminalText(coding)}, which was not asked for; refused`)
  }

  const gunzip = createGunzip()
  body.once('error', (error) => gunzip.destroy(error))
  body.pipe(gunzip)
  try {
    return await readBounded(gunzip, where, maxBytes)
  } catch (error) {
    body.destroy()
    const code = (error as {code?: string}).code
    if (typeof code === 'string' && code.startsWith('Z_')) throw new ReleaseError(`${where}: gzip that does not decode (${(error as Error).message}); refused`)
    throw error
  }
}
