import {createHash} from 'node:crypto'
import {closeSync, fstatSync, openSync, readSync} from 'node:fs'

import {Header} from 'tar/header'
import {Pax} from 'tar/pax'

import {ReleaseError} from '../errors.js'
import {NO_FOLLOW_READ, oneShotHash} from '../tree/hash-files.js'
import type {IndexWriter, PackedRelease} from './index-writer.js'
import {type TreeEntry, describeKind} from '../tree/release-tree.js'
import {SEGMENT_BYTES, type SegmentedGzip} from './segmented-gzip.js'

/** One release to pack: its name, where it lies, and what it holds in archive order (read as it is packed). */
export interface PackSource {
  release: string
  root: string
  entries: Iterable<TreeEntry>
}

/** A tar entry's header blocks: ustar, with a pax header before it for what ustar cannot hold. */
function entryHeader(path: string, size: number, mode: number, type: 'File' | 'Directory'): Buffer[] {
  const fast = ustarHeader(path, size, mode, type)
  if (fast) return [fast]
  const header = new Header({path, mode, size, type})
  return header.encode() ? [new Pax({path, size}).encode(), header.block!] : [header.block!]
}

/** A whole file entry (header, data, padding), for what pack holds in memory. */
export function tarEntry(path: string, data: Buffer, mode = 0o644): Buffer[] {
  const rest = data.length % 512
  return [...entryHeader(path, data.length, mode, 'File'), data, ...(rest === 0 ? [] : [ZEROS.subarray(0, 512 - rest)])]
}

/** Padding and the end-of-archive marker. */
const ZEROS = Buffer.alloc(1024)

/**
 * Writes the tar stream pack makes straight into SegmentedGzip's segment buffers:
 * headers as node-tar's Header and Pax encode them (the tar stream node-tar's Pack wrote
 * with `portable` and `noMtime`, byte for byte), file contents read synchronously, one
 * file after another, and hashed as they are copied.
 */
export class TarWriter {
  private buffer: Buffer
  private used = 0
  private readonly full: Buffer[] = []

  constructor(private readonly gzip: SegmentedGzip) {
    this.buffer = gzip.take()
  }

  /**
   * A release's files and empty directories, in order; each goes to `index` (release.json's
   * text, spooled) as it is written, so nothing is kept per file. Returns the release's digest.
   */
  async release(source: PackSource, index: IndexWriter): Promise<PackedRelease> {
    index.begin(source.release)
    for (const entry of source.entries) {
      if (entry.dir) {
        this.header(`${source.release}/${entry.path}/`, 0, 0o755, 'Directory')
        index.dir(entry.path)
      } else {
        const file = openReleaseFile(`${source.root}/${entry.path}`, `${source.release}/${entry.path}`)
        try {
          this.header(`${source.release}/${entry.path}`, file.size, file.executable ? 0o755 : 0o644, 'File')
          // Most files fit in the segment being filled: written without a promise each.
          const sha256 = file.size <= SEGMENT_BYTES - this.used && oneShotHash ? this.smallContent(file) : await this.content(file)
          this.pad(file.size)
          index.file(entry.path, file.size, file.executable, sha256)
        } finally {
          closeSync(file.fd)
        }
      }

      const flushing = this.flush()
      if (flushing) await flushing
    }

    return index.end()
  }

  /** A file entry (mode 0644) whose `size` bytes come as pieces, each copied before the next is asked for. */
  async entry(path: string, size: number, pieces: Iterable<Buffer>): Promise<void> {
    this.header(path, size, 0o644, 'File')
    let written = 0
    for (const piece of pieces) {
      this.append(piece)
      written += piece.length
      await this.flush()
    }

    if (written !== size) throw new Error(`${path}: ${written} bytes written, ${size} declared`)
    this.pad(size)
  }

  /** Writes what is buffered; with `last` (the default), the end-of-archive marker first. */
  async end(last = true): Promise<void> {
    // The end of the archive: two zero blocks.
    if (last) this.append(ZEROS)
    await this.flush()
    if (this.used > 0) await this.gzip.write(this.buffer, this.used)
    await this.gzip.end()
  }

  /** The bytes of a file that fits in the segment being filled, read straight into it and hashed there by crypto.hash (no Hash object); returns the sha256. */
  private smallContent(file: OpenedFile): string {
    this.readFully(file, file.size)
    const sha256 = oneShotHash!('sha256', this.buffer.subarray(this.used, this.used + file.size))
    this.used += file.size
    return sha256
  }

  /** The bytes of any file, read straight into the segment buffers and hashed as they go, segment after segment; returns the sha256. */
  private async content(file: OpenedFile): Promise<string> {
    await this.flush()
    const hash = createHash('sha256')
    let left = file.size
    while (left > 0) {
      if (this.used === SEGMENT_BYTES) {
        this.seal()
        await this.flush()
      }

      const read = this.readFully(file, Math.min(left, SEGMENT_BYTES - this.used))
      hash.update(this.buffer.subarray(this.used, this.used + read))
      this.used += read
      left -= read
    }

    return hash.digest('hex')
  }

  /** Reads `length` bytes of the file at the end of the segment (not moving `used`); a file shorter than that is being written. */
  private readFully(file: OpenedFile, length: number): number {
    let got = 0
    while (got < length) {
      const read = readSync(file.fd, this.buffer, this.used + got, length - got, null)
      if (read === 0) throw new ReleaseError(`${file.path}: changed while packing; pack again`)
      got += read
    }

    return got
  }

  private header(path: string, size: number, mode: number, type: 'File' | 'Directory'): void {
    // The common case, written in place: no buffer allocated per file.
    if (this.used + 512 <= SEGMENT_BYTES && writeUstarHeader(this.buffer, this.used, path, size, mode, type)) {
      this.used += 512
      return
    }

    for (const block of entryHeader(path, size, mode, type)) this.append(block)
  }

  private pad(size: number): void {
    const rest = size % 512
    if (rest === 0) return
    const length = 512 - rest
    if (this.used + length <= SEGMENT_BYTES) {
      this.buffer.fill(0, this.used, this.used + length)
      this.used += length
    } else this.append(ZEROS.subarray(0, length))
  }

  private append(data: Buffer): void {
    let offset = 0
    while (offset < data.length) {
      if (this.used === SEGMENT_BYTES) this.seal()
      const n = data.copy(this.buffer, this.used, offset)
      this.used += n
      offset += n
    }
  }

  /** A full segment waits for flush(); a fresh buffer takes its place. */
  private seal(): void {
    this.full.push(this.buffer)
    this.buffer = this.gzip.take()
    this.used = 0
  }

  /** Hands full segments to gzip: awaited only when there is one (most calls have none, and an await per file adds up). */
  private flush(): Promise<void> | void {
    if (this.used === SEGMENT_BYTES) this.seal()
    if (this.full.length > 0) return this.flushFull()
  }

  private async flushFull(): Promise<void> {
    while (this.full.length > 0) await this.gzip.write(this.full.shift()!, SEGMENT_BYTES)
  }
}

/**
 * The header node-tar's Header encodes for a short ASCII path (the common case), byte
 * for byte, about a hundred times faster; null for anything else (node-tar does those).
 * Fields pack leaves out (owners, mtime, link, prefix) stay zero; device numbers are 0.
 */
export function ustarHeader(path: string, size: number, mode: number, type: 'File' | 'Directory'): Buffer | null {
  const block = Buffer.alloc(512)
  return writeUstarHeader(block, 0, path, size, mode, type) ? block : null
}

/**
 * The constant part of a header for each mode and type pack writes (mode, type flag,
 * magic, version, device numbers; size and checksum fields left zero) and the sum of its
 * bytes for the checksum (the checksum field counted as spaces).
 */
const TEMPLATES = new Map<string, {block: Buffer; sum: number}>()

function template(mode: number, type: 'File' | 'Directory'): {block: Buffer; sum: number} {
  const key = `${mode}${type}`
  let found = TEMPLATES.get(key)
  if (!found) {
    const block = Buffer.alloc(512)
    block.write(octal(mode, 8), 100, 'latin1')
    block[156] = type === 'File' ? 0x30 : 0x35
    block.write('ustar\u000000', 257, 'latin1')
    // node-tar's device numbers default to 0 and are written.
    block.write(octal(0, 8), 329, 'latin1')
    block.write(octal(0, 8), 337, 'latin1')
    let sum = 8 * 0x20
    for (let i = 0; i < 512; i++) if (i < 148 || i >= 156) sum += block[i]
    found = {block, sum}
    TEMPLATES.set(key, found)
  }

  return found
}

/** ustarHeader written into `target` at `offset` (512 bytes); false, writing nothing, when node-tar must do it. */
function writeUstarHeader(target: Buffer, offset: number, path: string, size: number, mode: number, type: 'File' | 'Directory'): boolean {
  if (path.length >= 100 || size > 0o77777777777) return false
  let sum = 0
  for (let i = 0; i < path.length; i++) {
    const code = path.charCodeAt(i)
    if (code < 0x20 || code > 0x7e) return false
    sum += code
  }

  const {block, sum: base} = template(mode, type)
  block.copy(target, offset)
  target.write(path, offset, 'latin1')
  const sizeField = octal(size, 12)
  for (let i = 0; i < sizeField.length; i++) sum += sizeField.charCodeAt(i)
  target.write(sizeField, offset + 124, 'latin1')
  target.write(octal(base + sum, 8), offset + 148, 'latin1')
  return true
}

/** node-tar's numeric field: zero-padded octal, a space and a NUL (or the digits and a NUL when they fill it). */
function octal(value: number, size: number): string {
  const digits = value.toString(8)
  return digits.length === size - 1 ? `${digits}\0` : `${'0'.repeat(Math.max(0, size - digits.length - 2))}${digits} \0`
}

interface OpenedFile {
  fd: number
  path: string
  size: number
  executable: boolean
}

/**
 * Opens a file of a release for packing, its size and mode from the open file. One that
 * became a link, a FIFO or anything but a regular file since the tree was listed is
 * refused naming it (65); one that is gone changed while packing.
 */
export function openReleaseFile(path: string, label: string): OpenedFile {
  let fd: number
  try {
    fd = openSync(path, NO_FOLLOW_READ)
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === 'ENOENT' || code === 'ENOTDIR') throw new ReleaseError(`${path}: changed while packing; pack again`)
    if (code === 'ELOOP') throw new ReleaseError(`${label}: a symbolic link; a release may hold only regular files and directories`)
    throw error
  }

  const info = fstatSync(fd)
  if (!info.isFile()) {
    closeSync(fd)
    throw new ReleaseError(`${label}: ${describeKind(info)}; a release may hold only regular files and directories`)
  }

  return {fd, path, size: info.size, executable: (info.mode & 0o111) !== 0}
}
