import {createHash} from 'node:crypto'
import {createWriteStream} from 'node:fs'
import {type Readable, Transform} from 'node:stream'
import {pipeline} from 'node:stream/promises'

import {ReleaseError} from '../../errors.js'
import type {TrustProblem} from '../../util/trusted-path.js'
import type {ConditionalRead, Validators} from '../../conditional/validators.js'

/** How a repository's files are read: over HTTP(S), or from a directory. */
export interface Transport {
  /** `https://releases.example.com/repo/` or `/srv/repo`: what messages and records name. */
  readonly label: string
  /** `https`, `http` or `dir`. */
  readonly kind: 'https' | 'http' | 'dir'
  /** The location of a repository path, for messages. */
  locate(path: string): string
  /** A whole (small) file in memory; null when the repository has no such file. Longer than maxBytes: 65. */
  read(path: string, maxBytes: number): Promise<Buffer | null>
  /** Writes a file into `to`, checking its size and sha256 on the way; retries transient faults itself. */
  download(path: string, to: string, expected: {size: number; sha256: string}, onProgress?: (bytes: number) => void): Promise<void>
  /**
   * A small file read whole (as `read`), conditionally when `kept` holds the validators of
   * the copy the caller keeps: `unchanged` when the server says it still is (HTTP 304).
   * Transports that cannot ask (a directory) do not have it.
   */
  readConditional?(path: string, maxBytes: number, kept: Validators | null): Promise<ConditionalRead | null>
  /** Bytes of the bodies read so far, as they came over the wire; absent for a directory. */
  readonly bytesRead?: number
  /** A local repository: why its place does not vouch for it (util/trusted-path.ts), or null. Asked when no key is trusted. */
  trustProblem?(): TrustProblem | null
}

export type {ConditionalRead, Validators} from '../../conditional/validators.js'

/**
 * Copies a body into a file, refusing it the moment it is longer than the index says and
 * when it ends shorter or with another sha256 (65). Nothing here is retried: a body that
 * arrived complete and wrong is not a network fault.
 */
export async function writeChecked(body: Readable, to: string, where: string, expected: {size: number; sha256: string}, onProgress?: (bytes: number) => void): Promise<void> {
  const hash = createHash('sha256')
  let bytes = 0
  const check = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      bytes += chunk.length
      if (bytes > expected.size) return callback(new ReleaseError(`${where}: longer than the ${expected.size} bytes the index says; refused`))
      hash.update(chunk)
      onProgress?.(bytes)
      callback(null, chunk)
    },
    flush(callback) {
      if (bytes < expected.size) return callback(new ReleaseError(`${where}: truncated: ${bytes} of the ${expected.size} bytes the index says`))
      const sha256 = hash.digest('hex')
      if (sha256 !== expected.sha256) {
        return callback(
          new ReleaseError(`${where}: sha256 ${sha256} differs from the index's ${expected.sha256}; refused`, [
            'someone changed it after publishing, or a mirror serves another copy: publishing the same archive again repairs it (localpuppet publish ARCHIVE --repo DIR)',
          ]),
        )
      }

      callback()
    },
  })
  await pipeline(body, check, createWriteStream(to, {flags: 'w', mode: 0o600}))
}

export {readBounded} from '../../util/bounded-read.js'
