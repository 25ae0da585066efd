import {createHash} from 'node:crypto'
import {closeSync, openSync, readSync} from 'node:fs'
import {Worker} from 'node:worker_threads'

const HASH_BUFFER = Buffer.allocUnsafe(1024 * 1024)

/**
 * sha256 of a file, read synchronously through one reused 1 MiB buffer: for thousands of
 * small files this is three times faster than streams, and memory stays flat for large ones.
 */
export function hashFileSync(path: string): string {
  const hash = createHash('sha256')
  const fd = openSync(path, 'r')
  try {
    let read: number
    while ((read = readSync(fd, HASH_BUFFER, 0, HASH_BUFFER.length, null)) > 0) hash.update(HASH_BUFFER.subarray(0, read))
  } finally {
    closeSync(fd)
  }

  return hash.digest('hex')
}

/** Below this much work a second thread costs more to start (~20 ms) than it saves. */
const PARALLEL_MIN_FILES = 400
const PARALLEL_MIN_BYTES = 32 * 1024 * 1024

/**
 * The same loop as hashFileSync, for a worker thread. Plain CommonJS source so that it
 * runs whether localpuppet is bundled or loaded from src/.
 */
const WORKER_SOURCE = `
const {parentPort, workerData} = require('node:worker_threads')
const {closeSync, openSync, readSync} = require('node:fs')
const {createHash} = require('node:crypto')
const buffer = Buffer.allocUnsafe(1024 * 1024)
const hashes = []
try {
  for (const path of workerData) {
    const hash = createHash('sha256')
    const fd = openSync(path, 'r')
    try {
      let read
      while ((read = readSync(fd, buffer, 0, buffer.length, null)) > 0) hash.update(buffer.subarray(0, read))
    } finally {
      closeSync(fd)
    }
    hashes.push(hash.digest('hex'))
  }
  parentPort.postMessage({hashes})
} catch (error) {
  parentPort.postMessage({error: {message: error.message, code: error.code, path: error.path, syscall: error.syscall, errno: error.errno}})
}
`

/**
 * sha256 of each file, in order. Large sets are split over two threads (this one and a
 * worker, every other file): opening, reading and hashing thousands of files is bound by
 * system calls, and two cores do them in about half the time. A file that cannot be read
 * throws the same system error (code, path) as hashFileSync would.
 */
export async function hashFiles(paths: string[], totalBytes = 0): Promise<string[]> {
  if (paths.length < PARALLEL_MIN_FILES && totalBytes < PARALLEL_MIN_BYTES) return paths.map((path) => hashFileSync(path))
  const theirs = paths.filter((_, i) => i % 2 === 1)
  const worker = new Worker(WORKER_SOURCE, {eval: true, workerData: theirs})
  const done = new Promise<string[]>((resolve, reject) => {
    worker.once('message', (message: {hashes?: string[]; error?: Record<string, unknown>}) => {
      if (message.hashes) return resolve(message.hashes)
      reject(Object.assign(new Error(String(message.error?.message)), message.error))
    })
    worker.once('error', reject)
    worker.once('exit', (code) => reject(new Error(`hashing thread exited with ${code}`)))
  })
  // Nothing handles a rejection until ours are done: keep it from being reported as unhandled.
  done.catch(() => {})
  const hashes: string[] = new Array(paths.length)
  try {
    for (let i = 0; i < paths.length; i += 2) hashes[i] = hashFileSync(paths[i])
    const other = await done
    for (let i = 1, j = 0; i < paths.length; i += 2, j++) hashes[i] = other[j]
    return hashes
  } finally {
    void worker.terminate()
  }
}
