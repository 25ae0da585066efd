import {createReadStream} from 'node:fs'
import {open} from 'node:fs/promises'
import type {Readable} from 'node:stream'

import {InputError, describeFsError} from '../errors.js'

/** An archive to read: a file (66 when missing) or standard input for `-`. */
export async function openArchive(path: string): Promise<{stream: Readable; label: string}> {
  if (path === '-') return {stream: process.stdin, label: '<stdin>'}
  let handle
  try {
    handle = await open(path, 'r')
    if ((await handle.stat()).isDirectory()) throw new InputError(`archive ${path}: is a directory`)
  } catch (error) {
    await handle?.close()
    if (error instanceof InputError) throw error
    throw describeFsError(error, `archive ${path}`)
  }

  return {stream: createReadStream(path, {fd: handle, highWaterMark: 1024 * 1024}), label: path}
}
