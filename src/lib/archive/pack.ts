import {createHash, randomBytes} from 'node:crypto'
import {once} from 'node:events'
import {closeSync, openSync, readSync, rmSync, statSync, unlinkSync, writeSync} from 'node:fs'
import {rename, unlink} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {basename, dirname, join, resolve} from 'node:path'
import type {Writable} from 'node:stream'

import {ImmutabilityError, ReleaseError, UsageError, describeFsError} from '../errors.js'
import {parseReleaseRef} from '../release/release-ref.js'
import {resolveRelease} from '../release/resolve.js'
import {asIoError} from '../util/io-error.js'
import {onStop} from '../util/on-stop.js'
import {IndexWriter, type PackedIndex} from './index-writer.js'
import {RELEASE_INDEX, SIGNATURE_FILE, isSafeRelativePath} from './release-index.js'
import {type TreeEntry, treeEntries} from '../tree/release-tree.js'
import {SEGMENT_BYTES, SegmentedGzip} from './segmented-gzip.js'
import {keyId, loadSigningKey, signIndex} from './signature.js'
import {TarWriter} from './tar-writer.js'

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
  /** release.json's head and each release's digest (the file list is in the archive). */
  index: PackedIndex
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
 * those hashes, is known only at the end: its text goes to a spool of its own as the files
 * are read (IndexWriter: no object kept per file), and is then compressed as gzip members
 * of its own and written first, the files' spool after it (gzip readers read consecutive
 * members as one stream). What is hashed is what is archived, so a file changing
 * meanwhile can never make release.json disagree with the archive; memory does not grow
 * with the release. The archive appears only when complete.
 */
export async function packRelease(options: PackOptions): Promise<PackResult> {
  const ref = parseReleaseRef(options.ref, 'pack')
  // Trees are read as they are packed (treeEntries below), not listed beforehand: a list of
  // every file was memory that grew with the release.
  const resolution = await resolveRelease(options.moduleDir, ref, {allowMutable: options.allowMutable, checkTrees: false})
  const app = resolution.modulepath[0]
  if ((app.kind === 'trunk' || app.kind === 'branch' || app.linkedTo) && !options.allowMutable) {
    const why = app.linkedTo ? `resolves to ${app.linkedTo} (a link), which` : 'is mutable;'
    throw new ImmutabilityError(`pack ${options.ref}: ${app.release} ${why}${app.linkedTo ? ' can change;' : ''} archives carry tags`, ['tag a release, or pass --allow-mutable'])
  }

  await (await import('../secrets/seal-inputs.js')).refuseReleaseLayerSecrets(resolution.modulepath.map((entry) => ({release: entry.release, path: entry.path})))
  const key = options.signingKey ? await loadSigningKey(options.signingKey) : null
  const sources = resolution.modulepath.map((entry) => ({release: entry.release, root: entry.path, entries: packable(entry.release, treeEntries(entry.path, entry.release))}))

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
    // Three spools, each removed at once and used through its descriptor (nothing is left
    // behind, whatever stops pack): the files' compressed tar stream, release.json's text
    // as the files are read, and release.json's compressed entry. Memory does not grow
    // with the number of files.
    const openSpool = (name: string) => {
      const fd = openFd(name, 'wx+', 0o600)
      unlinkSync(name)
      return fd
    }

    const spoolFd = openSpool(spool)
    const indexFd = openSpool(`${spool}.index`)
    const headFd = openSpool(`${spool}.head`)
    // Files: the tar stream after release.json, compressed into the spool.
    const tar = new TarWriter(new SegmentedGzip((chunk) => writeAll(spoolFd, chunk), GZIP_LEVEL))
    const writer = new IndexWriter(indexFd)
    for (const source of sources) await tar.release(source, writer)

    const tag = app.kind === 'tag' ? app.release.slice(`${app.app}/tags/`.length) : null
    const {index, size, pieces} = writer.finish({app: app.app, tag, release: app.release, modulepath: sources.map((source) => source.release)})
    // Ed25519 signs the whole message at once: only a signed pack holds release.json in memory.
    const signature = key ? signIndex(gathered(size, pieces()), key) : null
    // release.json (and its signature) go first, as gzip members of their own, compressed
    // on the thread pool while the files' last members finish; then the files' members
    // as they were compressed.
    const headTar = new TarWriter(new SegmentedGzip((chunk) => writeAll(headFd, chunk), GZIP_LEVEL))
    const head = (async () => {
      await headTar.entry(RELEASE_INDEX, size, pieces())
      if (signature) await headTar.entry(SIGNATURE_FILE, signature.length, [signature])
      await headTar.end(false)
    })()
    head.catch(() => {})
    await tar.end()
    await head
    const result = {release: app.release, index, signedBy: key ? keyId(key) : null}
    if (!output || !temp) {
      const to = options.to!
      // A reader that goes away (`| head`) is an error event, not an exception.
      const closed = new Promise<never>((_, reject) => to.on('error', reject))
      closed.catch(() => {})
      const {sha256, bytes} = await emitArchive([headFd, spoolFd], async (chunk) => {
        if (!to.write(Buffer.from(chunk))) await Promise.race([once(to, 'drain'), closed])
      })
      return {...result, output: null, sha256, bytes}
    }

    const outFd = openFd(temp, 'wx', 0o644)
    const {sha256, bytes} = await emitArchive([headFd, spoolFd], (chunk) => writeAll(outFd, chunk))
    await rename(temp, output)
    return {...result, output, sha256, bytes}
  } catch (error) {
    if (temp) await unlink(temp).catch(() => {})
    // Writing the archive or its spool: a full disk (74), a reader gone (74), a missing
    // directory, a directory in the way.
    const path = (error as NodeJS.ErrnoException).path
    const spooling = typeof path === 'string' && path.startsWith(spool)
    const label = spooling ? `spool ${path}` : output ? `output ${output}` : 'standard output'
    const io = asIoError(error, label)
    if (io) throw io
    if (path === temp || spooling) throw describeFsError(error, label)
    throw error
  } finally {
    forget()
    for (const fd of fds) closeSync(fd)
  }
}

/** The archive's bytes in order: each spool's whole content, one after the other; with their sha256 and size. */
async function emitArchive(spools: number[], write: (chunk: Buffer) => Promise<void> | void): Promise<{sha256: string; bytes: number}> {
  const hash = createHash('sha256')
  let bytes = 0
  const buffer = Buffer.allocUnsafe(SEGMENT_BYTES)
  for (const fd of spools) {
    let position = 0
    let read: number
    while ((read = readSync(fd, buffer, 0, buffer.length, position)) > 0) {
      position += read
      const chunk = buffer.subarray(0, read)
      hash.update(chunk)
      bytes += read
      await write(chunk)
    }
  }

  return {sha256: hash.digest('hex'), bytes}
}

/** Pieces copied into one buffer of their total size as they come (each is good only until the next). */
function gathered(size: number, pieces: Iterable<Buffer>): Buffer {
  const whole = Buffer.allocUnsafe(size)
  let at = 0
  for (const piece of pieces) at += piece.copy(whole, at)
  return whole.subarray(0, at)
}

/** Writes a whole buffer at the file's current offset. */
function writeAll(fd: number, chunk: Buffer): void {
  let offset = 0
  while (offset < chunk.length) offset += writeSync(fd, chunk, offset, chunk.length - offset)
}

/**
 * What install would refuse, pack refuses: every path must be one an archive may carry
 * (no control characters, names of at most 255 bytes, as file systems allow). Checked as
 * the entries come; nothing is written unless the whole archive is.
 */
function* packable(release: string, entries: Iterable<TreeEntry>): Generator<TreeEntry> {
  for (const entry of entries) {
    if (!isSafeRelativePath(entry.path)) throw new ReleaseError(`${release}/${entry.path}: cannot be packed (a control character, or a name longer than 255 bytes)`)
    yield entry
  }
}

/** `foo/tags/1.4.0` packs to `foo-1.4.0.tar.gz`, `foo/trunk` to `foo-trunk.tar.gz`. */
export function defaultArchiveName(release: string): string {
  return `${release.replace(/\/(?:tags|branches)\//, '-').replace(/\//g, '-')}.tar.gz`
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory()
  } catch {
    return false
  }
}
