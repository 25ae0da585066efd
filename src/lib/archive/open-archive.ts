import {createReadStream} from 'node:fs'
import {open} from 'node:fs/promises'
import {resolve} from 'node:path'
import type {Readable} from 'node:stream'

import {InputError, describeFsError} from '../errors.js'
import {type TrustProblem, findTrustProblem, openedFileTrustProblem} from '../util/trusted-path.js'

/**
 * An archive to read: a file (66 when missing) or standard input for `-`.
 * `trustProblem`: why the file's place does not vouch for it (another user owns it or a
 * directory on the way, or others can write there), from its path and then from the
 * opened file's own fstat (a file swapped in between is caught); null for standard
 * input (the caller's own bytes) or a trusted file. Only an unsigned install acts on it:
 * a signature vouches for an archive wherever it lies.
 */
export async function openArchive(path: string): Promise<{stream: Readable; label: string; trustProblem: TrustProblem | null}> {
  if (path === '-') return {stream: process.stdin, label: '<stdin>', trustProblem: null}
  let trustProblem = findTrustProblem(path, {what: 'archive'})
  let handle
  try {
    handle = await open(path, 'r')
    const info = await handle.stat()
    if (info.isDirectory()) throw new InputError(`archive ${path}: is a directory`)
    trustProblem ??= openedFileTrustProblem(resolve(path), info, 'archive')
  } catch (error) {
    await handle?.close()
    if (error instanceof InputError) throw error
    throw describeFsError(error, `archive ${path}`)
  }

  return {stream: createReadStream(path, {fd: handle, highWaterMark: 1024 * 1024}), label: path, trustProblem}
}
