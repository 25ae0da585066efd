import {createReadStream} from 'node:fs'
import {open} from 'node:fs/promises'
import type {Readable} from 'node:stream'

import {InputError, describeFsError} from '../errors.js'
import {type TrustProblem, openedPathTrustProblem} from '../util/trusted-path.js'

/**
 * An archive to read: a file (66 when missing) or standard input for `-`.
 * `trustProblem`: why the file's place does not vouch for it (another user owns it or a
 * directory on the way, or others can write there), judged once it is open, by path and
 * by its own fstat (a file swapped in between is caught); null for standard
 * input (the caller's own bytes) or a trusted file. Only an unsigned install acts on it:
 * a signature vouches for an archive wherever it lies.
 */
export async function openArchive(path: string): Promise<{stream: Readable; label: string; trustProblem: TrustProblem | null}> {
  if (path === '-') return {stream: process.stdin, label: '<stdin>', trustProblem: null}
  let trustProblem: TrustProblem | null
  let handle
  try {
    handle = await open(path, 'r')
    const info = await handle.stat()
    if (info.isDirectory()) throw new InputError(`archive ${path}: is a directory`)
    trustProblem = openedPathTrustProblem(path, info, {what: 'archive'})
  } catch (error) {
    await handle?.close()
    if (error instanceof InputError) throw error
    throw describeFsError(error, `archive ${path}`)
  }

  return {stream: createReadStream(path, {fd: handle, highWaterMark: 1024 * 1024}), label: path, trustProblem}
}
