import crypto, {createHash} from 'node:crypto'
import {closeSync, constants, fstatSync, openSync, readSync} from 'node:fs'
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

/** What checking one file found: its sha256, size and mode, or why it has none. */
export interface FileCheck {
  /** null when not read: gone, not a regular file, or not the size expected. */
  sha256: string | null
  size: number
  executable: boolean
  /** The open file's owner and mode (absent when it could not be opened). */
  uid?: number
  mode?: number
  /** The open file's stat key (release-tree.ts fileStat), for a regular file read, when asked for: what was read, for the verification cache. */
  key?: string
  /** ENOENT (gone), ELOOP (a link), ENOTFILE (a directory, FIFO, device...), or another error code. */
  error?: string
}

/** Opening a release's file to read it: never through a link, never waiting on a FIFO put in its place. */
export const NO_FOLLOW_READ = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK

/** crypto.hash, one call for a whole buffer (no Hash object), where Node has it (20.12 and later). */
export const oneShotHash = (crypto as {hash?: (algorithm: string, data: Buffer) => string}).hash

interface CheckFs {
  openSync: typeof openSync
  fstatSync: typeof fstatSync
  readSync: typeof readSync
  closeSync: typeof closeSync
}

/**
 * Checks one file (this thread and the worker both run it; the worker gets its source):
 * opens without following links, takes size and mode from the open file, and reads only
 * a file of the size expected (a size that differs already says it changed). It uses
 * nothing but its arguments, so that its source runs anywhere.
 */
function checkFile(path: string, expectedSize: number | undefined, buffer: Buffer, fs: CheckFs, hashing: Hashing, flags: number, withKey: boolean): FileCheck {
  let fd: number
  try {
    fd = fs.openSync(path, flags)
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === 'ENOENT' || code === 'ENOTDIR') return {sha256: null, size: 0, executable: false, error: 'ENOENT'}
    if (code === 'ELOOP') return {sha256: null, size: 0, executable: false, error: 'ELOOP'}
    throw error
  }

  try {
    const info = fs.fstatSync(fd)
    const {uid, mode, size} = info
    const executable = (mode & 0o111) !== 0
    if (!info.isFile()) return {sha256: null, size, executable, uid, mode, error: 'ENOTFILE'}
    if (expectedSize !== undefined && expectedSize !== size) return {sha256: null, size, executable, uid, mode}
    // The same key as fileStat() in release-tree.ts (this source also runs in the worker: no
    // imports), made only when asked for: its times turned to text cost more than a small file's hash.
    const key = withKey ? `${info.dev}:${info.ino}:${size}:${mode}:${uid}:${info.mtimeMs}:${info.ctimeMs}` : undefined
    // Read the size the open file has, no further (no extra call to find the end); a
    // file shorter than that is being written: not what was recorded.
    if (size <= buffer.length && hashing.hash) {
      let got = 0
      for (let read = -1; got < size && read !== 0; got += read) read = fs.readSync(fd, buffer, got, size - got, null)
      if (got < size) return {sha256: null, size: got, executable, uid, mode}
      return {sha256: hashing.hash('sha256', buffer.subarray(0, size)), size, executable, uid, mode, key}
    }

    const hash = hashing.createHash('sha256')
    let read: number
    while ((read = fs.readSync(fd, buffer, 0, buffer.length, null)) > 0) hash.update(buffer.subarray(0, read))
    return {sha256: hash.digest('hex'), size, executable, uid, mode, key}
  } finally {
    fs.closeSync(fd)
  }
}

/** crypto's createHash, and its one-shot hash() where Node has it (20.12 and later): no Hash object per small file. */
interface Hashing {
  createHash: typeof createHash
  hash?: (algorithm: string, data: Buffer) => string
}

/**
 * Below this much work a second thread costs more than it saves. It takes 30-70 ms to
 * boot, and in a single pass two threads opening small files get little more done than
 * one (they contend in the kernel, and V8 compiles the hot loop on the second core). On
 * two cores: 6,016 files of Puppet code, 15 MB, are checked as fast without it; 10,000
 * files of 10 KB (105 MB) 8% faster with it, 10,000 of 20 KiB (200 MB) 16%. So the
 * bytes decide when they are known; the count of files when they are not.
 */
const PARALLEL_MIN_FILES = 400
const PARALLEL_MIN_BYTES = 32 * 1024 * 1024

/**
 * The worker: for each list of files it is sent, checks them, taking the next one from a
 * counter it shares with this thread (whichever is free takes it), then posts the
 * results under the list's number. Plain CommonJS source so that it runs whether
 * localpuppet is bundled or loaded from src/.
 */
const WORKER_SOURCE = `
const {parentPort} = require('node:worker_threads')
const fs = require('node:fs')
const checkFile = ${checkFile.toString()}
const buffer = Buffer.allocUnsafe(1024 * 1024)
const crypto = require('node:crypto')
parentPort.on('message', ({job, paths, sizes, flags, keys, next: shared}) => {
  const next = new Int32Array(shared)
  const results = []
  try {
    for (let i; (i = Atomics.add(next, 0, 1)) < paths.length; ) results.push([i, checkFile(paths[i], sizes ? sizes[i] : undefined, buffer, fs, crypto, flags, keys)])
    parentPort.postMessage({job, results})
  } catch (error) {
    parentPort.postMessage({job, error: {message: error.message, code: error.code, path: error.path, syscall: error.syscall, errno: error.errno}})
  }
})
`

interface WorkerReply {
  job: number
  results?: Array<[number, FileCheck]>
  error?: Record<string, unknown>
}

/** A list the worker was given, waiting for its reply. */
interface Waiting {
  resolve: (results: Array<[number, FileCheck]>) => void
  reject: (error: Error) => void
}

/**
 * The second hashing thread, one per process, shared by every check (verify checks one
 * release after another): one set of listeners, replies routed by job number. It does
 * not keep the process alive: it is referenced only while a check waits on it.
 */
let thread: {worker: Worker; jobs: number; waiting: Map<number, Waiting>; stopping: boolean} | null = null

/** Starts the hashing thread if none is running (it boots in ~30 ms, on the other core). */
function startCheckThread(): NonNullable<typeof thread> {
  if (thread) return thread
  const worker = new Worker(WORKER_SOURCE, {eval: true})
  worker.unref()
  const started = {worker, jobs: 0, waiting: new Map<number, Waiting>(), stopping: false}
  const settle = (job: number): Waiting | undefined => {
    const waiting = started.waiting.get(job)
    started.waiting.delete(job)
    if (started.waiting.size === 0) {
      worker.unref()
      if (started.stopping) void worker.terminate()
    }

    return waiting
  }

  worker.on('message', (message: WorkerReply) => {
    const waiting = settle(message.job)
    if (message.results) waiting?.resolve(message.results)
    else waiting?.reject(Object.assign(new Error(String(message.error?.message)), message.error))
  })
  // A thread that dies fails what waits on it; the next check starts another.
  const fail = (error: Error) => {
    if (thread === started) thread = null
    for (const job of [...started.waiting.keys()]) settle(job)?.reject(error)
  }

  worker.on('error', fail)
  worker.on('exit', (code) => fail(new Error(`hashing thread exited with ${code}`)))
  thread = started
  return started
}

/**
 * Stops the hashing thread once nothing waits on it (a later check starts another): for a
 * process that goes on for long after checking, as apply does while Puppet runs.
 */
export function stopCheckThread(): void {
  if (!thread) return
  // A list still being checked (one given up by an error) finishes first.
  if (thread.waiting.size === 0) void thread.worker.terminate()
  else thread.stopping = true
  thread = null
}

/**
 * Checks files on two threads for a large set: the worker (started by the constructor if
 * none runs yet, so that it boots while the caller prepares the list) takes files from
 * the list as soon as it is given, this thread joins when it calls finish().
 */
export class FileChecker {
  private readonly parallel: boolean

  private readonly keys: boolean

  /**
   * About how many files will be checked, and their total size when it is known (a second
   * thread only pays off for much); `keys`: each check carries the open file's stat key.
   */
  constructor(expectFiles: number, expectBytes?: number, options: {keys?: boolean} = {}) {
    this.keys = options.keys === true
    this.parallel = expectBytes === undefined ? expectFiles >= PARALLEL_MIN_FILES : expectBytes >= PARALLEL_MIN_BYTES
    if (this.parallel) startCheckThread()
  }

  /**
   * Hands the files to the worker, which starts on them at once; finish() checks the rest
   * on this thread and returns each file's check, in order. `sizes` (optional) are the
   * sizes expected. A file that cannot be read throws its system error (from finish()).
   */
  begin(paths: string[], sizes?: number[]): PendingCheck {
    const {keys} = this
    const check = (i: number) => checkFile(paths[i], sizes?.[i], HASH_BUFFER, fsModule, hashing, NO_FOLLOW_READ, keys)
    // A list long enough is worth the thread on its own (a caller that hands over batches
    // may not know the total beforehand).
    const current = (this.parallel || paths.length >= PARALLEL_MIN_FILES) && paths.length >= 2 ? startCheckThread() : null
    if (!current) return {finish: async () => paths.map((_, i) => check(i)), cancel() {}}

    const job = ++current.jobs
    const {worker} = current
    if (current.waiting.size === 0) worker.ref()
    const done = new Promise<Array<[number, FileCheck]>>((resolve, reject) => current.waiting.set(job, {resolve, reject}))
    // Nothing handles a rejection until this thread's share is done: keep it from being reported as unhandled.
    done.catch(() => {})
    const next = new Int32Array(new SharedArrayBuffer(4))
    worker.postMessage({job, paths, sizes, flags: NO_FOLLOW_READ, keys, next: next.buffer})
    // The worker takes no more files; its reply (for the files it had) is dropped.
    const cancel = () => void Atomics.store(next, 0, paths.length)
    return {
      async finish() {
        const results: FileCheck[] = new Array(paths.length)
        try {
          for (let i; (i = Atomics.add(next, 0, 1)) < paths.length; ) results[i] = check(i)
        } catch (error) {
          cancel()
          throw error
        }

        for (const [i, result] of await done) results[i] = result
        return results
      },
      cancel,
    }
  }

  /** Each file checked, in order (begin() then finish()). */
  async check(paths: string[], sizes?: number[]): Promise<FileCheck[]> {
    return this.begin(paths, sizes).finish()
  }
}

/** Files being checked: finish() checks the rest on this thread and returns every check; cancel() when they are not wanted after all. */
export interface PendingCheck {
  finish(): Promise<FileCheck[]>
  cancel(): void
}

const fsModule: CheckFs = {openSync, fstatSync, readSync, closeSync}
const hashing: Hashing = {createHash, hash: oneShotHash}
