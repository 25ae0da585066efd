import {createHash} from 'node:crypto'
import {closeSync, constants, fstatSync, openSync, readSync} from 'node:fs'
import {Worker} from 'node:worker_threads'

import {ReleaseError} from '../errors.js'
import {describeKind} from './release-tree.js'

/**
 * Reads a list of files in order, for pack: each file's size and mode, its content in
 * pieces, then its sha256. Large lists are read on a second thread, ahead of the caller,
 * so that opening, reading and hashing thousands of small files (system calls, bound by
 * latency) overlaps with what the caller does with them (tar and gzip). Files are opened
 * without following links and without waiting on a FIFO; a file that is a link, not a
 * regular file, gone, or shorter than it was a moment ago is refused, naming it.
 */
export interface FileReadAhead {
  /** The next file: its size and whether it is executable. */
  open(): Promise<{size: number; executable: boolean}>
  /** The next piece of its content, valid until the next call; null after the last. */
  piece(): Promise<Buffer | null>
  /** Its sha256 (hex), once piece() has returned null. */
  digest(): string
  close(): void
}

export interface ReadAheadFile {
  /** Where to open it. */
  path: string
  /** How to name it in a message (`foo/tags/1.0.0/manifests/init.pp`). */
  label: string
}

/** Below this many files, a second thread costs more to start (~30 ms) than it saves. */
const THREAD_MIN_FILES = 256
const SLOT_BYTES = 1024 * 1024
const SLOTS = 4
const OPEN_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK

export function readAhead(files: ReadAheadFile[], options: {thread?: boolean} = {}): FileReadAhead {
  return (options.thread ?? files.length >= THREAD_MIN_FILES) ? new ThreadReadAhead(files) : new SyncReadAhead(files)
}

/** Record kinds in a batch: [START, size, mode], [DATA, offset, length], [END, digest index], [FAIL, failure index]. */
const START = 0
const DATA = 1
const END = 2
const FAIL = 3

interface Failure {
  /** A system error's code (ENOENT, ELOOP, EACCES...), with its message and syscall. */
  code?: string
  message?: string
  syscall?: string
  errno?: number
  /** Not a regular file: what it is. */
  kind?: string
  /** Shorter than its size. */
  short?: boolean
}

function failureError(failure: Failure, file: ReadAheadFile): Error {
  if (failure.code === 'ENOENT' || failure.short) return new ReleaseError(`${file.path}: changed while packing; pack again`)
  if (failure.code === 'ELOOP') return new ReleaseError(`${file.label}: a symbolic link; a release may hold only regular files and directories`)
  if (failure.kind) return new ReleaseError(`${file.label}: ${failure.kind}; a release may hold only regular files and directories`)
  // Any other system error keeps its code and path, for the caller's usual handling (74, 65...).
  return Object.assign(new Error(failure.message ?? `${failure.code}: ${file.path}`), {code: failure.code, syscall: failure.syscall, errno: failure.errno, path: file.path})
}

/** The same work on this thread, one file after another: for small releases. */
class SyncReadAhead implements FileReadAhead {
  private next = 0
  private fd: number | null = null
  private file: ReadAheadFile | null = null
  private left = 0
  private hash = createHash('sha256')
  private sha256 = ''
  private readonly buffer = Buffer.allocUnsafe(SLOT_BYTES)

  constructor(private readonly files: ReadAheadFile[]) {}

  async open(): Promise<{size: number; executable: boolean}> {
    const file = this.files[this.next++]
    this.file = file
    try {
      this.fd = openSync(file.path, OPEN_FLAGS)
    } catch (error) {
      throw failureError(error as Failure, file)
    }

    const info = fstatSync(this.fd)
    if (!info.isFile()) {
      this.release()
      throw failureError({kind: describeKind(info)}, file)
    }

    this.left = info.size
    this.hash = createHash('sha256')
    return {size: info.size, executable: (info.mode & 0o111) !== 0}
  }

  async piece(): Promise<Buffer | null> {
    if (this.left === 0) {
      this.release()
      this.sha256 = this.hash.digest('hex')
      return null
    }

    const read = readSync(this.fd!, this.buffer, 0, Math.min(this.left, this.buffer.length), null)
    if (read === 0) {
      this.release()
      throw failureError({short: true}, this.file!)
    }

    this.left -= read
    const piece = this.buffer.subarray(0, read)
    this.hash.update(piece)
    return piece
  }

  digest(): string {
    return this.sha256
  }

  close(): void {
    this.release()
  }

  private release(): void {
    if (this.fd !== null) closeSync(this.fd)
    this.fd = null
  }
}

/**
 * The reading thread. It fills SLOTS shared buffers in turn; a slot's state is 0 when
 * free and 1 while the thread fills it or the caller reads it; state[SLOTS] set to 1
 * tells it to stop. Each full slot is posted with its records (plain numbers, cheap to
 * copy) and the digests of the files that ended in it. Plain CommonJS source, so that it
 * runs whether localpuppet is bundled or loaded from src/.
 */
const WORKER_SOURCE = `
const {parentPort, workerData} = require('node:worker_threads')
const fs = require('node:fs')
const {createHash} = require('node:crypto')
const {paths, slots, slotBytes, data, state: stateBuffer, flags} = workerData
const state = new Int32Array(stateBuffer)
function kind(info) {
  if (info.isSymbolicLink()) return 'a symbolic link'
  if (info.isBlockDevice() || info.isCharacterDevice()) return 'a device'
  if (info.isFIFO()) return 'a FIFO'
  if (info.isSocket()) return 'a socket'
  return 'not a regular file'
}
function main() {
  let slot = 0
  let used = 0
  let records = []
  let digests = []
  let failures = []
  const acquire = () => {
    while (Atomics.load(state, slot) !== 0) {
      if (Atomics.load(state, slots) === 1) return false
      Atomics.wait(state, slot, 1, 1000)
    }
    Atomics.store(state, slot, 1)
    return Atomics.load(state, slots) !== 1
  }
  const post = (done) => {
    parentPort.postMessage({slot, records, digests, failures, done})
    records = []
    digests = []
    failures = []
    if (done) return true
    slot = (slot + 1) % slots
    used = 0
    return acquire()
  }
  const fail = (failure) => {
    records.push(${FAIL}, failures.length, 0)
    failures.push(failure)
    post(true)
  }
  if (!acquire()) return
  let buffer = Buffer.from(data, 0, slotBytes)
  for (const path of paths) {
    let fd
    try {
      fd = fs.openSync(path, flags)
    } catch (error) {
      return fail({code: error.code, message: error.message, syscall: error.syscall, errno: error.errno})
    }
    try {
      const info = fs.fstatSync(fd)
      if (!info.isFile()) return fail({kind: kind(info)})
      records.push(${START}, info.size, info.mode)
      const hash = createHash('sha256')
      let left = info.size
      while (left > 0) {
        if (used === slotBytes) {
          if (!post(false)) return
          buffer = Buffer.from(data, slot * slotBytes, slotBytes)
        }
        const read = fs.readSync(fd, buffer, used, Math.min(left, slotBytes - used), null)
        if (read === 0) return fail({short: true})
        hash.update(buffer.subarray(used, used + read))
        records.push(${DATA}, used, read)
        used += read
        left -= read
      }
      records.push(${END}, digests.length, 0)
      digests.push(hash.digest('hex'))
    } catch (error) {
      return fail({code: error.code, message: error.message, syscall: error.syscall, errno: error.errno})
    } finally {
      fs.closeSync(fd)
    }
  }
  post(true)
}
main()
`

interface Batch {
  slot: number
  records: number[]
  digests: string[]
  failures: Failure[]
  done: boolean
}

class ThreadReadAhead implements FileReadAhead {
  private readonly worker: Worker
  private readonly data = new SharedArrayBuffer(SLOTS * SLOT_BYTES)
  private readonly state = new Int32Array(new SharedArrayBuffer(4 * (SLOTS + 1)))
  private readonly arrived: Batch[] = []
  private wake: (() => void) | null = null
  private failed: Error | null = null
  private batch: Batch | null = null
  private at = 0
  private next = 0
  private sha256 = ''

  constructor(private readonly files: ReadAheadFile[]) {
    this.worker = new Worker(WORKER_SOURCE, {
      eval: true,
      workerData: {paths: files.map((file) => file.path), slots: SLOTS, slotBytes: SLOT_BYTES, data: this.data, state: this.state.buffer, flags: OPEN_FLAGS},
    })
    this.worker.on('message', (batch: Batch) => {
      this.arrived.push(batch)
      this.wake?.()
    })
    this.worker.on('error', (error) => {
      this.failed = error
      this.wake?.()
    })
    this.worker.on('exit', (code) => {
      this.failed ??= new Error(`the reading thread exited with ${code}`)
      this.wake?.()
    })
  }

  async open(): Promise<{size: number; executable: boolean}> {
    const file = this.files[this.next++]
    const [kind, size, mode] = await this.record(file)
    if (kind !== START) throw new Error(`read-ahead: expected the start of ${file.path}`)
    return {size, executable: (mode & 0o111) !== 0}
  }

  async piece(): Promise<Buffer | null> {
    const file = this.files[this.next - 1]
    const [kind, a, b] = await this.record(file)
    if (kind === END) {
      this.sha256 = this.batch!.digests[a]
      return null
    }

    if (kind !== DATA) throw new Error(`read-ahead: expected the content of ${file.path}`)
    return Buffer.from(this.data, this.batch!.slot * SLOT_BYTES + a, b)
  }

  digest(): string {
    return this.sha256
  }

  close(): void {
    Atomics.store(this.state, SLOTS, 1)
    for (let slot = 0; slot < SLOTS; slot++) Atomics.notify(this.state, slot)
    void this.worker.terminate()
  }

  /** The next record, moving on to the next batch (and freeing the last one's slot) when needed. */
  private async record(file: ReadAheadFile): Promise<[number, number, number]> {
    while (this.batch === null || this.at >= this.batch.records.length) {
      if (this.batch) {
        if (this.batch.done) throw new Error('read-ahead: read past the last file')
        Atomics.store(this.state, this.batch.slot, 0)
        Atomics.notify(this.state, this.batch.slot)
        this.batch = null
      }

      while (this.arrived.length === 0) {
        if (this.failed) throw this.failed
        await new Promise<void>((resolve) => {
          this.wake = resolve
        })
        this.wake = null
      }

      this.batch = this.arrived.shift()!
      this.at = 0
    }

    const {records} = this.batch
    const record: [number, number, number] = [records[this.at], records[this.at + 1], records[this.at + 2]]
    this.at += 3
    if (record[0] === FAIL) throw failureError(this.batch.failures[record[1]], file)
    return record
  }
}
