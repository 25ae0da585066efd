import {createHash} from 'node:crypto'
import {closeSync, openSync, writeSync} from 'node:fs'
import {join} from 'node:path'
import {type Readable, Transform, Writable} from 'node:stream'
import {pipeline} from 'node:stream/promises'
import {createGunzip} from 'node:zlib'

import {LocalpuppetError, ReleaseError} from '../errors.js'
import {faultPoint} from '../util/fault.js'
import {type TrustProblem, UNSIGNED_HINT, refuseUnlessAllowed} from '../util/trusted-path.js'
import {
  type IndexSummary,
  MAX_INDEX_BYTES,
  RELEASE_INDEX,
  SIGNATURE_FILE,
  indexDirs,
  indexFiles,
  isSafeRelativePath,
  parseReleasePath,
  readIndex,
} from '../archive/release-index.js'
import {type CommitResult, Staging, describeInstallError} from './staging.js'
import type {TreeFile} from '../tree/release-tree.js'
import {type ByteSource, fdSource} from '../util/json-stream.js'
import {type EntrySink, TarFormatError, TarReader} from '../archive/tar-reader.js'
import {loadTrustedKeys, verifyIndexSignature} from '../archive/signature.js'

export interface InstallOptions {
  moduleDir: string
  /** --trust: key files or directories; the default trust directory is added when it exists. */
  trust?: string[]
  trustDir?: string | null
  /** --allow-untrusted: install into a module directory others can write (see Staging.open), or an unsigned archive from a place others can write. */
  allowUntrusted?: boolean
  /** Why the archive's place does not vouch for it (openArchive): refused (77) unless a trusted key signs it or --allow-untrusted. */
  archiveTrustProblem?: TrustProblem | null
}

export interface InstallResult extends CommitResult {
  release: string
  signedBy: string | null
  /** The trust problems --allow-untrusted let through (module dir, `.localpuppet`, `<app>/tags`). */
  untrusted: string[]
}

/** installArchive's result, with the archive's sha256 (of the bytes read: what a repository's index lists). */
export type ArchiveInstallResult = InstallResult & {sha256: string}

/** Entry types that are plain data; everything else (links, devices, FIFOs) is refused. */
const FILE_TYPES = new Set(['File', 'OldFile', 'ContiguousFile'])

/**
 * Installs a release archive made by `pack`, reading it once as a stream. Every entry is
 * checked before anything becomes visible: release.json first (and its signature, when
 * keys are trusted), then each file must be listed there, with its size and sha256, as a
 * regular file under a declared release. Any failure is a ReleaseError (65) naming the
 * entry (an I/O failure such as a full disk is an IoError, 74), and the module
 * directory is left exactly as it was.
 */
export async function installArchive(source: Readable, label: string, options: InstallOptions): Promise<ArchiveInstallResult> {
  try {
    return await install(source, label, options)
  } catch (error) {
    // A refused archive is read no further: close it now, not when the GC finds its handle.
    source.destroy()
    throw error
  }
}

async function install(source: Readable, label: string, options: InstallOptions): Promise<ArchiveInstallResult> {
  const trusted = await loadTrustedKeys(options.trust ?? [], options.trustDir)
  // Unsigned, nothing but its place vouches for what root is about to install.
  const archiveProblem = trusted.length === 0 ? (options.archiveTrustProblem ?? null) : null
  refuseUnlessAllowed(archiveProblem, {allow: options.allowUntrusted, content: true, hints: [UNSIGNED_HINT]})
  const staging = await Staging.open(options.moduleDir, options).catch((error: unknown) => {
    throw describeInstallError(error, options.moduleDir)
  })
  const spool = new IndexSpool(staging.dir)
  try {
    const {index, signedBy, sha256} = await extract(source, label, staging, trusted, spool)
    // Dependencies first: a release never appears before what it needs. Each release's
    // files (for its record) are read again from release.json's spool as they are written.
    const releases = index.releases
      .map((entry, i) => ({...entry, files: {[Symbol.iterator]: () => releaseFiles(spool.open, i)}, dirs: entry.dirs ?? [], mutable: parseReleasePath(entry.release)?.kind !== 'tag'}))
      .reverse()
    const result = await staging.commit(releases, {type: 'archive', path: label, sha256}, signedBy)
    return {...result, release: index.release, sha256, signedBy, untrusted: [...(archiveProblem ? [archiveProblem.message] : []), ...staging.untrusted]}
  } catch (error) {
    throw describeInstallError(error, options.moduleDir)
  } finally {
    spool.close()
    await staging.close()
  }
}

/** One release's files as release.json lists them. */
function* releaseFiles(open: () => ByteSource, release: number): Generator<TreeFile> {
  for (const {file} of indexFiles(open, release)) yield file
}

/**
 * release.json as it comes out of the archive, written to a file in staging and read back
 * a batch at a time as it is needed (checked, matched against the entries, written into
 * the records): 17 MB of it for 96,000 files, held nowhere in memory.
 */
class IndexSpool {
  private fd: number | null = null
  private size = 0

  constructor(private readonly dir: string) {}

  write(chunk: Buffer): void {
    this.fd ??= openSync(join(this.dir, '.release.json'), 'wx+', 0o600)
    for (let offset = 0; offset < chunk.length; ) offset += writeSync(this.fd, chunk, offset, chunk.length - offset, this.size + offset)
    this.size += chunk.length
  }

  /** Its bytes from the start (each call a reader of its own). */
  readonly open = (): ByteSource => (this.fd === null ? () => 0 : fdSource(this.fd))

  close(): void {
    if (this.fd !== null) closeSync(this.fd)
    this.fd = null
  }
}

/** Raw bytes read past the end-of-archive marker (the gzip trailer, padding) before refusing. */
const MAX_RAW_TRAILING_BYTES = 1024 * 1024

/**
 * Reads the archive once: gzip (or plain tar) decoded on another thread, tar entries
 * parsed as they arrive, each file streamed into staging and hashed on the way. Work is
 * bounded by what release.json declares: an entry larger than listed is refused at its
 * header, the tar data may not exceed the declared files plus their headers, and the
 * reading stops at the end-of-archive marker (trailing data is refused, not decompressed
 * forever).
 */
async function extract(
  source: Readable,
  label: string,
  staging: Staging,
  trusted: Awaited<ReturnType<typeof loadTrustedKeys>>,
  spool: IndexSpool,
): Promise<{index: IndexSummary; signedBy: string | null; sha256: string}> {
  let index: IndexSummary | null = null
  let indexBytes: Buffer | null = null
  let signature: Buffer | null = null
  let signedBy: string | null = null
  let listed: ListedFiles | null = null
  let dirs = new Set<string>()
  let budget = Number.POSITIVE_INFINITY
  let entries = 0
  let spooled = false

  /** release.json read from its spool and checked: what every entry is matched against. */
  const loadIndex = () => {
    const read = readIndex(spool.open, label)
    index = read
    listed = new ListedFiles(read, spool.open)
    dirs = indexDirs(read)
    budget = declaredTarBytes(read)
  }

  /**
   * release.json's signature is checked once it is known whether one follows (its bytes
   * are not kept after), and release.json is read only then: nothing a trusted key has
   * not signed is parsed.
   */
  const checkSignature = () => {
    if (!spooled) return
    if (trusted.length > 0 && signedBy === null) signedBy = verifyIndexSignature(indexBytes!, signature, trusted, label)
    indexBytes = null
    if (index === null) loadIndex()
  }

  const reader = new TarReader((entry) => {
    const position = entries++
    const path = entry.path
    if (reader.position > budget) throw refuse(`${label}: more data than ${RELEASE_INDEX} declares (entry ${JSON.stringify(path)})`)
    if (position === 0) {
      if (path !== RELEASE_INDEX || !FILE_TYPES.has(entry.type)) throw refuse(`${label}: does not start with ${RELEASE_INDEX}; not an archive made by localpuppet pack`)
      if (entry.size > MAX_INDEX_BYTES) throw refuse(`${label}: ${RELEASE_INDEX} is too large`)
      // Kept in memory only to check a signature against (Ed25519 signs the whole message at once).
      const kept = trusted.length > 0 ? Buffer.alloc(entry.size) : null
      let fill = 0
      return {
        data(chunk) {
          spool.write(chunk)
          if (kept) fill += chunk.copy(kept, fill)
        },
        end() {
          spooled = true
          indexBytes = kept
          if (!kept) loadIndex()
        },
      }
    }

    if (position === 1 && path === SIGNATURE_FILE && FILE_TYPES.has(entry.type)) {
      if (entry.size > MAX_SIGNATURE_BYTES) throw refuse(`${label}: ${SIGNATURE_FILE} is too large`)
      return collect(entry.size, (bytes) => {
        signature = bytes
        checkSignature()
      })
    }

    checkSignature()
    const archivePath = path.replace(/\/$/, '')
    if (!isSafeRelativePath(archivePath)) throw refuse(`${label}: entry ${JSON.stringify(path)}: absolute or '..' path`)
    if (entry.type === 'Directory') {
      if (!index!.releases.some((r) => r.release === archivePath || r.release.startsWith(`${archivePath}/`) || archivePath.startsWith(`${r.release}/`))) {
        throw refuse(`${label}: entry ${JSON.stringify(path)}: outside the releases the archive declares`)
      }

      if (entry.size !== 0) throw refuse(`${label}: entry ${JSON.stringify(path)}: a directory with data`)
      // Empty directories are made from release.json's list; other entries are implied.
      return null
    }

    if (!FILE_TYPES.has(entry.type)) throw refuse(`${label}: entry ${JSON.stringify(path)}: ${describeType(entry.type)}; release archives hold only regular files`)
    const found = listed!.receive(archivePath)
    if (!found) throw refuse(`${label}: entry ${JSON.stringify(path)}: ${dirs.has(archivePath) ? 'listed as an empty directory' : `not listed in ${RELEASE_INDEX}`}`)
    if (found === 'twice') throw refuse(`${label}: entry ${JSON.stringify(path)}: appears twice`)
    if (entry.size !== found.file.size) throw refuse(`${label}: ${archivePath}: size ${entry.size} differs from ${found.file.size} in ${RELEASE_INDEX}`)
    const file = staging.createFile(archivePath, found.file.executable, found.tag, found.file.size)
    return {
      data: (chunk) => file.write(chunk),
      end() {
        const written = file.finish()
        if (written.size !== found.file.size || written.sha256 !== found.file.sha256) {
          throw refuse(`${label}: ${archivePath}: content does not match its sha256 in ${RELEASE_INDEX}`)
        }

        if (listed!.received === 1) faultPoint('install:extracting')
      },
    }
  })

  const first = await peek(source)
  if (first === null) throw refuse(`${label}: empty archive; no ${RELEASE_INDEX}`)
  const archiveHash = createHash('sha256')
  let raw = 0
  let rawAtEnd = -1
  const hashing = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      archiveHash.update(chunk)
      raw += chunk.length
      if (reader.ended && rawAtEnd < 0) rawAtEnd = raw
      if (rawAtEnd >= 0 && raw - rawAtEnd > MAX_RAW_TRAILING_BYTES) return callback(refuse(`${label}: more than ${MAX_RAW_TRAILING_BYTES} bytes of data after the end of the archive`))
      callback(null, chunk)
    },
  })
  const consume = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      try {
        reader.push(chunk)
        callback()
      } catch (error) {
        callback(error as Error)
      }
    },
    final(callback) {
      try {
        reader.finish()
        callback()
      } catch (error) {
        callback(error as Error)
      }
    },
  })
  const gzipped = first.length >= 2 && first[0] === 0x1f && first[1] === 0x8b
  try {
    await (gzipped ? pipeline(source, hashing, createGunzip({chunkSize: 64 * 1024}), consume) : pipeline(source, hashing, consume))
  } catch (error) {
    if (error instanceof LocalpuppetError) throw error
    if (error instanceof TarFormatError) throw refuse(`${label}: not a valid release archive (${error.message})`)
    const code = (error as NodeJS.ErrnoException).code
    if (typeof code === 'string' && code.startsWith('Z_')) throw refuse(`${label}: not a valid release archive (${(error as Error).message})`)
    throw error
  }

  if (!spooled) throw refuse(`${label}: empty archive; no ${RELEASE_INDEX}`)
  checkSignature()
  const missing = listed!.missing()
  if (missing.count > 0) throw refuse(`${label}: truncated or incomplete: ${missing.count} listed file(s) missing, first ${missing.first}`)
  return {index: index!, signedBy, sha256: archiveHash.digest('hex')}
}

const MAX_SIGNATURE_BYTES = 64 * 1024

/**
 * The files release.json lists, and which of them the archive has delivered. Pack writes
 * them in the order listed, so an entry is normally the next one: release.json is read
 * again from its spool beside the archive, one file ahead, with no lookup table and
 * nothing kept per file. An archive in any other order is still read: a map by archive
 * path of every listed file is made the first time an entry is not the next one.
 */
class ListedFiles {
  /** How many files were received. */
  received = 0
  private readonly releases: Array<{release: string; tag: boolean}>
  private readonly total: number
  private readonly sequence: Generator<{release: number; file: TreeFile}>
  /** The next file in release.json's order (undefined: not read yet; null: none left). */
  private next: {release: number; file: TreeFile} | null | undefined
  private byPath: Map<string, {release: number; file: TreeFile; got: boolean}> | null = null

  constructor(
    index: IndexSummary,
    private readonly open: () => ByteSource,
  ) {
    this.releases = index.releases.map((entry) => ({release: entry.release, tag: parseReleasePath(entry.release)?.kind === 'tag'}))
    this.total = index.releases.reduce((sum, entry) => sum + entry.files, 0)
    this.sequence = indexFiles(open)
  }

  /** The listed file at an archive path (a tag's or not), 'twice' when it came already, or null when none is listed there. */
  receive(archivePath: string): {file: TreeFile; tag: boolean} | 'twice' | null {
    if (!this.byPath) {
      const next = this.peek()
      if (next && isAt(archivePath, this.releases[next.release].release, next.file.path)) {
        this.next = undefined
        this.received++
        return {file: next.file, tag: this.releases[next.release].tag}
      }

      this.byPath = this.allByPath()
    }

    const found = this.byPath.get(archivePath)
    if (!found) return null
    if (found.got) return 'twice'
    found.got = true
    this.received++
    return {file: found.file, tag: this.releases[found.release].tag}
  }

  /** How many listed files did not come, and the first of them. */
  missing(): {count: number; first: string | null} {
    if (!this.byPath) {
      const next = this.peek()
      return {count: this.total - this.received, first: next ? `${this.releases[next.release].release}/${next.file.path}` : null}
    }

    let count = 0
    let first: string | null = null
    for (const [path, found] of this.byPath) {
      if (found.got) continue
      count++
      first ??= path
    }

    return {count, first}
  }

  private peek(): {release: number; file: TreeFile} | null {
    if (this.next === undefined) this.next = this.sequence.next().value ?? null
    return this.next ?? null
  }

  /** Every listed file by archive path, those received so far (the first ones, in order) marked. */
  private allByPath(): Map<string, {release: number; file: TreeFile; got: boolean}> {
    const map = new Map<string, {release: number; file: TreeFile; got: boolean}>()
    let position = 0
    for (const {release, file} of indexFiles(this.open)) map.set(`${this.releases[release].release}/${file.path}`, {release, file, got: position++ < this.received})
    return map
  }
}

/** Whether `archivePath` is `<release>/<path>`, without making that string. */
function isAt(archivePath: string, release: string, path: string): boolean {
  return archivePath.length === release.length + 1 + path.length && archivePath.startsWith(release) && archivePath.charCodeAt(release.length) === 0x2f && archivePath.endsWith(path)
}

/**
 * The most tar data an archive of this index can hold before its end marker: release.json
 * and a signature, then each file and empty directory with a header and a pax header of
 * at most a few KiB (a path is at most 4096 bytes).
 */
function declaredTarBytes(index: IndexSummary): number {
  const entry = (size: number) => 512 + 8192 + size + 511
  let total = entry(MAX_INDEX_BYTES) + entry(MAX_SIGNATURE_BYTES) + 1024
  for (const release of index.releases) total += release.bytes + release.files * entry(0) + (release.dirs?.length ?? 0) * entry(0)
  return total
}

/** The first chunk of a stream, put back so that the stream reads from its start. */
async function peek(source: Readable): Promise<Buffer | null> {
  return new Promise((resolve, reject) => {
    const done = (chunk: Buffer | null, error?: Error) => {
      source.off('readable', onReadable)
      source.off('end', onEnd)
      source.off('error', onError)
      if (error) reject(error)
      else resolve(chunk)
    }

    const onReadable = () => {
      const chunk = source.read() as Buffer | null
      if (chunk === null) return
      source.unshift(chunk)
      done(chunk)
    }

    const onEnd = () => done(null)
    const onError = (error: Error) => done(null, error)
    source.on('readable', onReadable)
    source.on('end', onEnd)
    source.on('error', onError)
  })
}

/** Collects a small entry (release.json, its signature) and hands it over at its end. */
function collect(size: number, onDone: (bytes: Buffer) => void): EntrySink {
  const bytes = Buffer.alloc(size)
  let fill = 0
  return {
    data(chunk) {
      chunk.copy(bytes, fill)
      fill += chunk.length
    },
    end: () => onDone(bytes),
  }
}

function refuse(message: string): LocalpuppetError {
  return new ReleaseError(message)
}

function describeType(type: string): string {
  if (type === 'SymbolicLink') return 'a symbolic link'
  if (type === 'Link') return 'a hard link'
  if (type === 'CharacterDevice' || type === 'BlockDevice') return 'a device'
  if (type === 'FIFO') return 'a FIFO'
  return `an entry of type ${type}`
}
