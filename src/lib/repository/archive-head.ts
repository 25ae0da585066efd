import {createReadStream} from 'node:fs'

import {Parser} from 'tar/parse'
import type {ReadEntry} from 'tar/read-entry'

import {ReleaseError} from '../errors.js'
import {type IndexSummary, MAX_INDEX_BYTES, RELEASE_INDEX, SIGNATURE_FILE, parseIndex} from '../archive/release-index.js'

export interface ArchiveHead {
  /** release.json, checked whole, without its file lists. */
  index: IndexSummary
  /** The key id release.json.sig claims (checked against trusted keys only on install), or null. */
  signedBy: string | null
}

/**
 * Reads an archive made by `pack` only as far as its release.json (and signature): what
 * it holds, without extracting anything. Full verification is the install's job.
 */
export async function readArchiveHead(path: string, label: string): Promise<ArchiveHead> {
  const stream = createReadStream(path)
  const parser = new Parser({strict: true})
  let indexBytes: Buffer | null = null
  let signature: Buffer | null = null
  let entries = 0
  const done = new Promise<void>((resolve, reject) => {
    const finish = () => {
      stream.destroy()
      resolve()
    }

    parser.on('entry', (entry: ReadEntry) => {
      const position = entries++
      if (position > 1 || (position === 1 && entry.path !== SIGNATURE_FILE)) {
        entry.resume()
        return finish()
      }

      if (position === 0 && entry.path !== RELEASE_INDEX) {
        entry.resume()
        return reject(new ReleaseError(`${label}: does not start with ${RELEASE_INDEX}; not an archive made by localpuppet pack`))
      }

      if (entry.size > MAX_INDEX_BYTES) {
        entry.resume()
        return reject(new ReleaseError(`${label}: ${entry.path} is too large`))
      }

      const chunks: Buffer[] = []
      entry.on('data', (chunk: Buffer) => chunks.push(chunk))
      entry.on('end', () => {
        if (position === 0) indexBytes = Buffer.concat(chunks)
        else signature = Buffer.concat(chunks)
      })
    })
    parser.on('end', finish)
    parser.on('error', (error: Error) => reject(new ReleaseError(`${label}: not a valid release archive (${error.message})`)))
    stream.on('error', reject)
  })
  stream.pipe(parser)
  await done
  if (indexBytes === null) throw new ReleaseError(`${label}: empty archive; no ${RELEASE_INDEX}`)
  const index = parseIndex(indexBytes, label)
  let signedBy: string | null = null
  if (signature !== null) {
    try {
      const parsed = JSON.parse((signature as Buffer).toString('utf8')) as {keyId?: unknown}
      signedBy = typeof parsed.keyId === 'string' ? parsed.keyId : null
    } catch {
      throw new ReleaseError(`${label}: ${SIGNATURE_FILE} is not valid JSON`)
    }
  }

  return {index, signedBy}
}
