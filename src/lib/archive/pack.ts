import crypto, {createHash, randomBytes} from 'node:crypto'
import {once} from 'node:events'
import {closeSync, constants as fsConstants, fstatSync, openSync, readSync, rmSync, statSync, unlinkSync, writeSync} from 'node:fs'
import {rename, unlink} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {basename, dirname, join, resolve} from 'node:path'
import type {Writable} from 'node:stream'

import {Header, Pax} from 'tar'

import {ImmutabilityError, ReleaseError, UsageError, describeFsError} from '../errors.js'
import {parseReleaseRef} from '../release/release-ref.js'
import {resolveRelease} from '../release/resolve.js'
import {asIoError} from '../util/io-error.js'
import {onStop} from '../util/on-stop.js'
import {type IndexedRelease, type ReleaseIndex, INDEX_FORMAT, INDEX_FORMAT_DIRS, RELEASE_INDEX, SIGNATURE_FILE, isSafeRelativePath, serializeIndex} from './release-index.js'
import {type TreeEntry, type TreeFile, describeKind, listEntries, treeDigest} from './release-tree.js'
import {SEGMENT_BYTES, SegmentedGzip, gzipMember} from './segmented-gzip.js'
import {keyId, loadSigningKey, signIndex} from './signature.js'

export interface PackOptions {
  moduleDir: string
  ref: string
  /** A file path; null to write to `to`; absent for `<app>-<tag>.tar.gz` in the working directory. */
  output?: string | null
  to?: Writable
  signingKey?: string
  allowMutable?: boolean
}

export interface PackResult {
  release: string
  /** The archive's path (absolute), or null when written to a stream. */
  output: string | null
  sha256: string
  bytes: number
  index: ReleaseIndex
  signedBy: string | null
}

/** gzip level of `gzip -6`, the default of `tar -czf`; fixed so output never depends on a default. */
const GZIP_LEVEL = 6

/**
 * Packs a release and every release on its modulepath into one deterministic .tar.gz:
 * release.json first (and release.json.sig when signing), then each release's files and
 * empty directories in byte order of path, with fixed metadata (no owners, no mtimes,
 * mode 0644 or 0755) and a fixed gzip header. The same tree gives the same bytes.
 *
 * Every file is read once: straight into the tar stream, hashed on the way, while two
 * other threads compress it (SegmentedGzip) into a spool file. release.json, which lists
 * those hashes, is known only at the end: it is compressed as gzip members of its own and
 * written first, then the spool is copied after it (gzip readers read consecutive members
 * as one stream). What is hashed is what is archived, so a file changing meanwhile can
 * never make release.json disagree with the archive; memory does not grow with the
 * release. The archive appears only when complete.
 */
export async function packRelease(options: PackOptions): Promise<PackResult> {
  const ref = parseReleaseRef(options.ref, 'pack')
  const resolution = await resolveRelease(options.moduleDir, ref, {allowMutable: options.allowMutable})
  const app = resolution.modulepath[0]
  if ((app.kind === 'trunk' || app.kind === 'branch' || app.linkedTo) && !options.allowMutable) {
    const why = app.linkedTo ? `resolves to ${app.linkedTo} (a link), which` : 'is mutable;'
    throw new ImmutabilityError(`pack ${options.ref}: ${app.release} ${why}${app.linkedTo ? ' can change;' : ''} archives carry tags`, ['tag a release, or pass --allow-mutable'])
  }

  const key = options.signingKey ? await loadSigningKey(options.signingKey) : null
  const sources = resolution.modulepath.map((entry) => ({release: entry.release, root: entry.path, entries: resolution.trees.get(entry.release) ?? listEntries(entry.path, entry.release)}))
  checkPackable(sources)

  const output = options.output === null ? null : resolve(options.output ?? defaultArchiveName(app.release))
  // Refused before any work, not after packing it all.
  if (output && isDirectory(output)) throw new UsageError(`output ${output} is a directory: name the archive file (-o ${join(output, defaultArchiveName(app.release))})`)
  // The spool lies beside the archive (the same file system, so a full disk shows at once);
  // for a stream, in the temporary directory.
  const suffix = randomBytes(4).toString('hex')
  const spool = join(output ? dirname(output) : tmpdir(), `.${output ? basename(output) : 'localpuppet-pack'}.${suffix}.spool`)
  const temp = output ? join(dirname(output), `.${basename(output)}.${suffix}.tmp`) : null
  const fds: number[] = []
  const openFd = (path: string, flags: string, mode: number) => {
    const fd = openSync(path, flags, mode)
    fds.push(fd)
    return fd
  }

  // The temporary archive goes if localpuppet is stopped (^C, SIGTERM) before it is renamed into place.
  const forget = temp ? onStop(() => rmSync(temp, {force: true})) : () => {}
  try {
    const spoolFd = openFd(spool, 'wx+', 0o600)
    // Removed at once and used through its descriptor: nothing is left behind, whatever stops pack.
    unlinkSync(spool)
    // Files: the tar stream after release.json, compressed into the spool.
    const tar = new TarWriter(new SegmentedGzip((chunk) => writeAll(spoolFd, chunk), GZIP_LEVEL))
    const releases: IndexedRelease[] = []
    for (const source of sources) releases.push(await tar.release(source))

    await tar.end()

    const tag = app.kind === 'tag' ? app.release.slice(`${app.app}/tags/`.length) : null
    const index: ReleaseIndex = {
      // Format 1 unless a release keeps empty directories: older readers read the others.
      format: releases.some((r) => r.dirs) ? INDEX_FORMAT_DIRS : INDEX_FORMAT,
      app: app.app,
      tag,
      release: app.release,
      modulepath: releases.map((r) => r.release),
      releases,
    }
    const indexBytes = serializeIndex(index)
    const signature = key ? signIndex(indexBytes, key) : null
    // release.json (and its signature) first, as gzip members of their own, then the
    // files' members as they were compressed.
    const head = [...tarEntry(RELEASE_INDEX, indexBytes), ...(signature ? tarEntry(SIGNATURE_FILE, signature) : [])]
    const result = {release: app.release, index, signedBy: key ? keyId(key) : null}
    if (!output || !temp) {
      const to = options.to!
      // A reader that goes away (`| head`) is an error event, not an exception.
      const closed = new Promise<never>((_, reject) => to.on('error', reject))
      closed.catch(() => {})
      const {sha256, bytes} = await emitArchive(head, spoolFd, async (chunk) => {
        if (!to.write(Buffer.from(chunk))) await Promise.race([once(to, 'drain'), closed])
      })
      return {...result, output: null, sha256, bytes}
    }

    const outFd = openFd(temp, 'wx', 0o644)
    const {sha256, bytes} = await emitArchive(head, spoolFd, (chunk) => writeAll(outFd, chunk))
    await rename(temp, output)
    return {...result, output, sha256, bytes}
  } catch (error) {
    if (temp) await unlink(temp).catch(() => {})
    // Writing the archive or its spool: a full disk (74), a reader gone (74), a missing
    // directory, a directory in the way.
    const path = (error as NodeJS.ErrnoException).path
    const label = path === spool ? `spool ${spool}` : output ? `output ${output}` : 'standard output'
    const io = asIoError(error, label)
    if (io) throw io
    if (path === temp || path === spool) throw describeFsError(error, label)
    throw error
  } finally {
    forget()
    for (const fd of fds) closeSync(fd)
  }
}

/**
 * The archive's bytes in order: the head's tar entries, compressed a segment at a time
 * (the same members SegmentedGzip makes), then the spool; with their sha256 and size.
 */
async function emitArchive(head: Buffer[], spoolFd: number, write: (chunk: Buffer) => Promise<void> | void): Promise<{sha256: string; bytes: number}> {
  const hash = createHash('sha256')
  let bytes = 0
  const emit = async (chunk: Buffer) => {
    hash.update(chunk)
    bytes += chunk.length
    await write(chunk)
  }

  const tarHead = Buffer.concat(head)
  for (let offset = 0; offset < tarHead.length; offset += SEGMENT_BYTES) {
    await emit(gzipMember(tarHead.subarray(offset, offset + SEGMENT_BYTES), GZIP_LEVEL))
  }

  const buffer = Buffer.allocUnsafe(SEGMENT_BYTES)
  let position = 0
  let read: number
  while ((read = readSync(spoolFd, buffer, 0, buffer.length, position)) > 0) {
    position += read
    await emit(buffer.subarray(0, read))
  }

  return {sha256: hash.digest('hex'), bytes}
}

/** Writes a whole buffer at the file's current offset. */
function writeAll(fd: number, chunk: Buffer): void {
  let offset = 0
  while (offset < chunk.length) offset += writeSync(fd, chunk, offset, chunk.length - offset)
}

interface PackSource {
  release: string
  root: string
  entries: TreeEntry[]
}

/**
 * What install would refuse, pack refuses first: every path must be one an archive may
 * carry (no control characters, names of at most 255 bytes, as file systems allow).
 */
function checkPackable(sources: PackSource[]): void {
  for (const source of sources) {
    for (const entry of source.entries) {
      if (!isSafeRelativePath(entry.path)) {
        throw new ReleaseError(`${source.release}/${entry.path}: cannot be packed (a control character, or a name longer than 255 bytes)`)
      }
    }
  }
}

/** A tar entry's header blocks: ustar, with a pax header before it for what ustar cannot hold. */
function entryHeader(path: string, size: number, mode: number, type: 'File' | 'Directory'): Buffer[] {
  const fast = ustarHeader(path, size, mode, type)
  if (fast) return [fast]
  const header = new Header({path, mode, size, type})
  return header.encode() ? [new Pax({path, size}).encode(), header.block!] : [header.block!]
}

/** A whole file entry (header, data, padding), for what pack holds in memory. */
function tarEntry(path: string, data: Buffer, mode = 0o644): Buffer[] {
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
class TarWriter {
  private buffer: Buffer
  private used = 0
  private readonly full: Buffer[] = []

  constructor(private readonly gzip: SegmentedGzip) {
    this.buffer = gzip.take()
  }

  /** A release's files and empty directories, in order; returns what release.json lists for it. */
  async release(source: PackSource): Promise<IndexedRelease> {
    const files: TreeFile[] = []
    const dirs: string[] = []
    for (const entry of source.entries) {
      if (entry.dir) {
        this.header(`${source.release}/${entry.path}/`, 0, 0o755, 'Directory')
        dirs.push(entry.path)
      } else {
        files.push(await this.content(source, entry.path))
      }

      await this.flush()
    }

    return {release: source.release, digest: treeDigest(files, dirs), files, ...(dirs.length > 0 ? {dirs} : {})}
  }

  /** Writes what is buffered; with `last` (the default), the end-of-archive marker first. */
  async end(last = true): Promise<void> {
    // The end of the archive: two zero blocks.
    if (last) this.append(ZEROS)
    await this.flush()
    if (this.used > 0) await this.gzip.write(this.buffer, this.used)
    await this.gzip.end()
  }

  /**
   * One file: its header, then its bytes read straight into the segment buffers and
   * hashed there (a file that fits in the current segment in one go, by crypto.hash: no
   * Hash object per file).
   */
  private async content(source: PackSource, path: string): Promise<TreeFile> {
    const file = openReleaseFile(`${source.root}/${path}`, `${source.release}/${path}`)
    try {
      const {size, executable} = file
      this.header(`${source.release}/${path}`, size, executable ? 0o755 : 0o644, 'File')
      await this.flush()
      let sha256: string
      if (size <= SEGMENT_BYTES - this.used && oneShotHash) {
        this.readFully(file, size)
        sha256 = oneShotHash('sha256', this.buffer.subarray(this.used, this.used + size))
        this.used += size
      } else {
        const hash = createHash('sha256')
        let left = size
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

        sha256 = hash.digest('hex')
      }

      this.pad(size)
      return {path, size, executable, sha256}
    } finally {
      closeSync(file.fd)
    }
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

/** `foo/tags/1.4.0` packs to `foo-1.4.0.tar.gz`, `foo/trunk` to `foo-trunk.tar.gz`. */
export function defaultArchiveName(release: string): string {
  return `${release.replace(/\/(?:tags|branches)\//, '-').replace(/\//g, '-')}.tar.gz`
}

/** crypto.hash, one call for a whole buffer, where Node has it (20.12 and later). */
const oneShotHash = (crypto as {hash?: (algorithm: string, data: Buffer) => string}).hash

interface OpenedFile {
  fd: number
  path: string
  size: number
  executable: boolean
}

/** Opening a file to pack: never through a link, and never waiting on a FIFO put in its place. */
const OPEN_FLAGS = fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW | fsConstants.O_NONBLOCK

/**
 * Opens a file of a release for packing, its size and mode from the open file. One that
 * became a link, a FIFO or anything but a regular file since the tree was listed is
 * refused naming it (65); one that is gone changed while packing.
 */
export function openReleaseFile(path: string, label: string): OpenedFile {
  let fd: number
  try {
    fd = openSync(path, OPEN_FLAGS)
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

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory()
  } catch {
    return false
  }
}
