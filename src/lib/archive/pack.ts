import {createHash, randomBytes} from 'node:crypto'
import {once} from 'node:events'
import {closeSync, createWriteStream, fstatSync, openSync, readSync} from 'node:fs'
import {rename, unlink} from 'node:fs/promises'
import {basename, dirname, join, resolve} from 'node:path'
import type {Writable} from 'node:stream'

import {Header, Pax} from 'tar'

import {ImmutabilityError, ReleaseError, describeFsError} from '../errors.js'
import {parseReleaseRef} from '../release/release-ref.js'
import {resolveRelease} from '../release/resolve.js'
import {asIoError} from '../util/io-error.js'
import {type IndexedRelease, type ReleaseIndex, INDEX_FORMAT, INDEX_FORMAT_DIRS, RELEASE_INDEX, SIGNATURE_FILE, isSafeRelativePath, serializeIndex} from './release-index.js'
import {type TreeFile, compareBytes, readReleaseContent, treeDigest} from './release-tree.js'
import {SEGMENT_BYTES, SegmentedGzip} from './segmented-gzip.js'
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
 * mode 0644 or 0755) and a fixed gzip header. The same tree gives the same bytes. Files
 * are read twice, synchronously: hashed for release.json (on two threads), then copied
 * into the archive while two other threads compress it (SegmentedGzip); memory does not
 * grow with the release. The archive appears only when complete.
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
  const releases: Array<PackedRelease> = []
  for (const entry of resolution.modulepath) {
    const {files, dirs} = await readReleaseContent(entry.path, entry.release)
    releases.push({release: entry.release, digest: treeDigest(files, dirs), files, ...(dirs.length > 0 ? {dirs} : {}), root: entry.path})
  }

  const tag = app.kind === 'tag' ? app.release.slice(`${app.app}/tags/`.length) : null
  const index: ReleaseIndex = {
    // Format 1 unless a release keeps empty directories: older readers read the others.
    format: releases.some((r) => r.dirs) ? INDEX_FORMAT_DIRS : INDEX_FORMAT,
    app: app.app,
    tag,
    release: app.release,
    modulepath: releases.map((r) => r.release),
    releases: releases.map(({root: _root, ...release}) => release),
  }
  checkPackable(index)
  const indexBytes = serializeIndex(index)
  const signature = key ? signIndex(indexBytes, key) : null

  const hash = createHash('sha256')
  let bytes = 0
  const write = async (to: Writable) => {
    const gzip = new SegmentedGzip(async (chunk) => {
      hash.update(chunk)
      bytes += chunk.length
      if (!to.write(chunk)) await once(to, 'drain')
    }, GZIP_LEVEL)
    const tar = new TarWriter(gzip)
    tar.file(RELEASE_INDEX, indexBytes)
    if (signature) tar.file(SIGNATURE_FILE, signature)
    await tar.write(releases)
    await gzip.end()
  }

  const result = {release: app.release, sha256: '', bytes: 0, index, signedBy: key ? keyId(key) : null}
  if (options.output === null) {
    await write(options.to!)
    return {...result, output: null, sha256: hash.digest('hex'), bytes}
  }

  const output = resolve(options.output ?? defaultArchiveName(app.release))
  const temp = join(dirname(output), `.${basename(output)}.${randomBytes(4).toString('hex')}.tmp`)
  const file = createWriteStream(temp, {flags: 'wx', mode: 0o644})
  try {
    const failed = new Promise<never>((_, reject) => file.once('error', reject))
    await Promise.race([write(file), failed])
    file.end()
    await Promise.race([once(file, 'close'), failed])
    await rename(temp, output)
  } catch (error) {
    file.destroy()
    await unlink(temp).catch(() => {})
    // Writing the archive itself: a full disk (74), a missing directory, a directory in the way.
    const io = asIoError(error, `output ${output}`)
    if (io) throw io
    if ((error as NodeJS.ErrnoException).path === temp) throw describeFsError(error, `output ${output}`)
    throw error
  }

  return {...result, output, sha256: hash.digest('hex'), bytes}
}

interface PackedRelease extends IndexedRelease {
  root: string
}

/**
 * What install would refuse, pack refuses first: every path must be one an archive may
 * carry (no control characters, names of at most 255 bytes, as file systems allow).
 */
function checkPackable(index: ReleaseIndex): void {
  for (const release of index.releases) {
    for (const path of [...release.files.map((file) => file.path), ...(release.dirs ?? [])]) {
      if (!isSafeRelativePath(path)) {
        throw new ReleaseError(`${release.release}/${path}: cannot be packed (a control character, or a name longer than 255 bytes)`)
      }
    }
  }
}

/** Padding and the end-of-archive marker. */
const ZEROS = Buffer.alloc(1024)

/**
 * Writes the tar stream pack makes straight into SegmentedGzip's segment buffers:
 * headers as node-tar's Header and Pax encode them (the tar stream node-tar's Pack wrote
 * with `portable` and `noMtime`, byte for byte), file contents read synchronously, one
 * file after another, and hashed again: one that changed since release.json was made
 * stops the pack.
 */
class TarWriter {
  private buffer: Buffer
  private used = 0
  private readonly full: Buffer[] = []

  constructor(private readonly gzip: SegmentedGzip) {
    this.buffer = gzip.take()
  }

  file(path: string, data: Buffer, mode = 0o644): void {
    this.header(path, data.length, mode, 'File')
    this.append(data)
    this.pad(data.length)
  }

  async write(releases: PackedRelease[]): Promise<void> {
    for (const release of releases) {
      const entries = [...release.files.map((file) => ({path: file.path, file})), ...(release.dirs ?? []).map((dir) => ({path: `${dir}/`, file: null}))]
      entries.sort((a, b) => compareBytes(a.path, b.path))
      for (const {path, file} of entries) {
        if (file) await this.content(release, file)
        else this.header(`${release.release}/${path}`, 0, 0o755, 'Directory')
        await this.flush()
      }
    }

    // The end of the archive: two zero blocks.
    this.append(ZEROS)
    await this.flush()
    await this.gzip.write(this.buffer, this.used)
  }

  private async content(release: {release: string; root: string}, file: TreeFile): Promise<void> {
    const absolute = join(release.root, file.path)
    const changed = () => new ReleaseError(`${absolute}: changed while packing; pack again`)
    let fd: number
    try {
      fd = openSync(absolute, 'r')
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') throw changed()
      throw error
    }

    try {
      const info = fstatSync(fd)
      if (!info.isFile() || info.size !== file.size) throw changed()
      this.header(`${release.release}/${file.path}`, file.size, file.executable ? 0o755 : 0o644, 'File')
      await this.flush()
      const hash = createHash('sha256')
      let left = file.size
      while (left > 0) {
        if (this.used === SEGMENT_BYTES) {
          this.seal()
          await this.flush()
        }

        const read = readSync(fd, this.buffer, this.used, Math.min(left, SEGMENT_BYTES - this.used), null)
        if (read === 0) throw changed()
        hash.update(this.buffer.subarray(this.used, this.used + read))
        this.used += read
        left -= read
      }

      if (hash.digest('hex') !== file.sha256) throw changed()
    } finally {
      closeSync(fd)
    }

    this.pad(file.size)
  }

  private header(path: string, size: number, mode: number, type: 'File' | 'Directory'): void {
    const fast = ustarHeader(path, size, mode, type)
    if (fast) return this.append(fast)
    const header = new Header({path, mode, size, type})
    // Paths or sizes a ustar header cannot hold go into a pax header before it.
    if (header.encode()) this.append(new Pax({path, size}).encode())
    this.append(header.block!)
  }

  private pad(size: number): void {
    const rest = size % 512
    if (rest !== 0) this.append(ZEROS.subarray(0, 512 - rest))
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

  private async flush(): Promise<void> {
    if (this.used === SEGMENT_BYTES) this.seal()
    while (this.full.length > 0) await this.gzip.write(this.full.shift()!, SEGMENT_BYTES)
  }
}

/**
 * The header node-tar's Header encodes for a short ASCII path (the common case), byte
 * for byte, about a hundred times faster; null for anything else (node-tar does those).
 * Fields pack leaves out (owners, mtime, link, prefix) stay zero; device numbers are 0.
 */
export function ustarHeader(path: string, size: number, mode: number, type: 'File' | 'Directory'): Buffer | null {
  if (path.length >= 100 || size > 0o77777777777 || !/^[\x20-\x7e]*$/.test(path)) return null
  const block = Buffer.alloc(512)
  block.write(path, 0, 'latin1')
  block.write(octal(mode, 8), 100, 'latin1')
  block.write(octal(size, 12), 124, 'latin1')
  block[156] = type === 'File' ? 0x30 : 0x35
  block.write('ustar\u000000', 257, 'latin1')
  // node-tar's device numbers default to 0 and are written.
  block.write(octal(0, 8), 329, 'latin1')
  block.write(octal(0, 8), 337, 'latin1')
  let sum = 8 * 0x20
  for (let i = 0; i < 512; i++) if (i < 148 || i >= 156) sum += block[i]
  block.write(octal(sum, 8), 148, 'latin1')
  return block
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
