import {lstatSync, readFileSync, readdirSync, unlinkSync} from 'node:fs'
import {join} from 'node:path'

import {ReleaseError, RepositoryUnavailableError} from '../errors.js'
import {type InstallRecord, localpuppetDir, readRecordHead, recordPath} from '../install/install-record.js'
import type {InstallResult} from '../install/install-archive.js'
import {Staging, type StagedRelease, describeInstallError} from '../install/staging.js'
import {parseReleasePath} from '../archive/release-index.js'
import {sortTagsNewestFirst} from '../release/release-ref.js'
import {type TreeFile, fileStat, hashFileSync} from '../tree/release-tree.js'
import {faultPoint} from '../util/fault.js'
import {CachedKeys, recordFingerprint, verifiedCacheDir} from '../verify/verified-cache.js'
import {
  MAX_FILE_OBJECT_BYTES,
  MAX_LIST_OBJECT_BYTES,
  type ManifestRelease,
  assembleRelease,
  maxCompressed,
  objectPath,
  openObject,
  parseManifest,
  parsePart,
  releaseParts,
} from './objects.js'

/** What of a repository this reads: objects by path (null when the repository has none there), and where a path is, for messages. */
export interface ObjectReader {
  read(path: string, maxBytes: number): Promise<Buffer | null>
  locate(path: string): string
}

/** What the signed index says of the tag (repository/repository-index.ts's PublishedTag). */
export interface SignedTag {
  archive: string
  size: number
  sha256: string
  modulepath: string[]
  digests: Record<string, string>
  objects?: {manifest: string; size: number}
}

/** How a tag was delivered: files linked to an installed tag's copy (shared) or written from downloaded content (written), shared + written being the files installed; the distinct contents downloaded for them (downloaded, at most written). */
export interface DeliveryCounts {
  shared: number
  written: number
  downloaded: number
}

export type DeltaInstallResult = InstallResult & {files: DeliveryCounts; bytes: number}

export interface DeltaOptions {
  moduleDir: string
  allowUntrusted?: boolean
  /** The key that signed the repository's index (which names the objects), for the install records. */
  signedBy: string | null
  /** Bytes downloaded so far, of at most `total`. */
  onProgress?: (bytes: number, total: number) => void
}

/** Installed tags of an app looked at for files to share: the newest few. */
const TAGS_LOOKED_AT = 4
/** Objects downloaded at once. */
const PARALLEL = 8
/** Written files up to this many are synced one by one, not by a sync of the whole file system. */
const SYNC_EACH_AT_MOST = 32

/**
 * Installs a tag from the repository's content-addressed objects when the module directory
 * already has most of it: the tag's manifest and the parts of its file list it does not
 * have are downloaded (each checked by the sha256 the signed index or the manifest gives),
 * the list checked against the signed digest, then each file is either a hard link to the
 * same content in an installed tag (read back and hashed: what it holds now, not what its
 * record says) or downloaded, and the releases committed by the usual atomic install.
 * Gives null (nothing installed, nothing changed) when the index names no objects, no
 * installed tag of the same apps shares anything, the repository lacks the manifest or a
 * part (a mirror of the archives only), or what would be downloaded is more than the
 * archive: the caller downloads the archive. A difference that does not match the signed
 * index is 65, with nothing installed.
 */
export async function installDelta(transport: ObjectReader, published: SignedTag, options: DeltaOptions): Promise<DeltaInstallResult | null> {
  if (!published.objects) return null
  const missing = published.modulepath.filter((release) => !isInstalled(options.moduleDir, release, published.digests[release]))
  const local = localContent(options.moduleDir, missing)
  if (local.byContent.size === 0) return null

  let bytes = 0
  let total = 0
  /** An object, checked; null when the repository does not have it. */
  const readObject = async (expected: {sha256: string; size: number}, maxBytes: number): Promise<Buffer | null> => {
    const path = objectPath(expected.sha256)
    const compressed = await transport.read(path, maxBytes)
    if (compressed === null) return null
    bytes += compressed.length
    options.onProgress?.(bytes, Math.max(bytes, total))
    return openObject(compressed, expected, transport.locate(path))
  }

  const fetchObject = async (expected: {sha256: string; size: number}, maxBytes: number): Promise<Buffer> => {
    const found = await readObject(expected, maxBytes)
    if (found === null) throw new RepositoryUnavailableError(`${transport.locate(objectPath(expected.sha256))}: not found, though the signed index names it`, ['the repository may be mid-publish or incomplete: try again'])
    return found
  }

  // A mirror that carries the archives and not the objects is still a repository: its archive is downloaded.
  const manifestWhere = transport.locate(objectPath(published.objects.manifest))
  const manifestBytes = await readObject({sha256: published.objects.manifest, size: published.objects.size}, maxCompressed(published.objects.size))
  if (manifestBytes === null) return null
  const manifest = parseManifest(manifestBytes, manifestWhere)
  const listed = manifest.releases.map((entry) => entry.release)
  if (listed.length !== published.modulepath.length || listed.some((release, i) => release !== published.modulepath[i] || manifest.releases[i].digest !== published.digests[release])) {
    throw new ReleaseError(`${manifestWhere}: lists ${listed.join(', ')}, not the releases and digests the signed index gives (${published.modulepath.join(', ')}); refused`)
  }

  // Each release's file list: the parts this node has from its own records, the rest downloaded.
  const releases: Array<{entry: ManifestRelease; files: TreeFile[]}> = []
  for (const entry of manifest.releases.filter((r) => missing.includes(r.release))) {
    const parts = await pool(entry.parts, PARALLEL, async (part) => {
      const known = local.parts.get(part.sha256)
      if (known) return known
      const found = await readObject(part, maxCompressed(Math.min(part.size, MAX_LIST_OBJECT_BYTES)))
      return found && parsePart(found, part, transport.locate(objectPath(part.sha256)))
    })
    if (parts.includes(null)) return null
    releases.push({entry, files: assembleRelease(entry, parts as TreeFile[][], published.digests[entry.release], manifestWhere)})
  }

  // Worth it only when what is missing is less than the archive, and no file too large to hold.
  const needed = new Map<string, TreeFile>()
  for (const {files} of releases) for (const file of files) if (!local.byContent.has(contentKey(file))) needed.set(file.sha256, file)
  let neededBytes = 0
  for (const file of needed.values()) neededBytes += file.size
  if (neededBytes > published.size || [...needed.values()].some((file) => file.size > MAX_FILE_OBJECT_BYTES)) return null
  // What is left to download is at most this (compressed, it is less): the progress line's end.
  total = bytes + neededBytes

  const counts: DeliveryCounts = {shared: 0, written: 0, downloaded: 0}
  // Downloads start at once, PARALLEL at a time, and are taken in the order the files are written.
  const downloads = new Map<string, Promise<Buffer>>()
  const queue = [...needed.values()]
  let active = 0
  const download = (file: TreeFile): Promise<Buffer> => {
    let started = downloads.get(file.sha256)
    if (!started) {
      started = fetchObject(file, maxCompressed(file.size))
      started.catch(() => {})
      downloads.set(file.sha256, started)
    }

    return started
  }

  const next = () => {
    while (active < PARALLEL && queue.length > 0) {
      active++
      void download(queue.shift()!).finally(() => {
        active--
        next()
      }).catch(() => {})
    }
  }

  next()
  // A few files written are made durable one by one; many, by one sync of the file system
  // (syncfs waits for everything dirty on it, other programs' writes too: on a busy disk, seconds).
  const syncEach = needed.size <= SYNC_EACH_AT_MOST
  const staging = await Staging.open(options.moduleDir, options).catch((error: unknown) => {
    throw describeInstallError(error, options.moduleDir)
  })
  try {
    for (const {entry, files} of releases) {
      for (const file of files) {
        const archivePath = `${entry.release}/${file.path}`
        const from = local.byContent.get(contentKey(file))
        // Its stat before the link (a link moves the ctime): the key its tag's last check kept means the bytes it read then.
        const seen = from && lstatSync(from.path, {throwIfNoEntry: false})
        const checked = from !== undefined && seen !== undefined && from.key !== '' && fileStat(seen).key === from.key
        if (from !== undefined && staging.linkFile(archivePath, from.path, file.executable, seen)) {
          if (checked || hashFileSync(join(staging.dir, archivePath)) === file.sha256) {
            counts.shared++
            continue
          }

          // The installed copy was changed since: its tag's verify says so; this one is downloaded.
          unlinkSync(join(staging.dir, archivePath))
        }

        const content = await download(file)
        const staged = staging.createFile(archivePath, file.executable, true, file.size)
        staged.write(content)
        const written = staged.finish(syncEach)
        if (written.sha256 !== file.sha256) throw new ReleaseError(`${archivePath}: written content does not match its sha256; refused`)
        counts.written++
        if (counts.written === 1) faultPoint('install:extracting')
      }
    }

    counts.downloaded = downloads.size
    options.onProgress?.(bytes, bytes)
    const staged: StagedRelease[] = releases
      .map(({entry, files}) => ({release: entry.release, digest: entry.digest, files, dirs: entry.dirs ?? [], mutable: false}))
      .reverse()
    const result = await staging.commit(staged, {type: 'archive', path: transport.locate(published.archive), sha256: published.sha256}, options.signedBy, {dataSynced: syncEach})
    return {...result, release: published.modulepath[0], signedBy: options.signedBy, untrusted: [...staging.untrusted], files: counts, bytes}
  } catch (error) {
    throw describeInstallError(error, options.moduleDir)
  } finally {
    await staging.close()
  }
}

/** Installed and recorded with this digest, and read-only (else an install killed before it finished: done again). */
function isInstalled(moduleDir: string, release: string, digest: string | undefined): boolean {
  const info = lstatSync(join(moduleDir, release), {throwIfNoEntry: false})
  return readRecordHead(moduleDir, release)?.digest === digest && info !== undefined && info.isDirectory() && (info.mode & 0o222) === 0
}

function contentKey(file: TreeFile): string {
  return `${file.sha256}:${file.executable ? 'x' : '-'}`
}

/** A file of an installed tag to link from, with the stat key its tag's last check kept ('' for none: read once linked). */
interface LocalFile {
  path: string
  key: string
}

/**
 * What the installed tags of the same apps hold, from their install records: each content
 * (sha256 and executable flag) at one path to link from, with its verified key when the
 * tag's last check kept one (verify/verified-cache.ts), and the parts of their file lists
 * (so that a part that did not change is not downloaded). The newest few tags of each app
 * that are installed and recorded.
 */
function localContent(moduleDir: string, releases: string[]): {byContent: Map<string, LocalFile>; parts: Map<string, TreeFile[]>} {
  const byContent = new Map<string, LocalFile>()
  const parts = new Map<string, TreeFile[]>()
  // (Each record's fingerprint is a hash of the whole record: only worth it when some check kept keys.)
  const anyKeys = lstatSync(verifiedCacheDir(moduleDir), {throwIfNoEntry: false}) !== undefined
  const apps = new Set(releases.map((release) => parseReleasePath(release)?.app).filter((app): app is string => app !== undefined))
  for (const app of apps) {
    const recorded = readdirSafe(join(localpuppetDir(moduleDir), 'records', app, 'tags'))
      .filter((name) => name.endsWith('.json'))
      .map((name) => name.slice(0, -'.json'.length))
    for (const tag of sortTagsNewestFirst(recorded).slice(0, TAGS_LOOKED_AT)) {
      const release = `${app}/tags/${tag}`
      if (releases.includes(release) || !lstatSync(join(moduleDir, release), {throwIfNoEntry: false})?.isDirectory()) continue
      const record = readRecordSync(moduleDir, release)
      if (!record) continue
      // The keys are in the record's order, one per file, for this very record (its fingerprint).
      const keys = anyKeys ? CachedKeys.open(moduleDir, release, recordFingerprint(record)) : null
      try {
        for (const file of record.files) {
          const key = contentKey(file)
          const verified = keys?.next() ?? ''
          if (!byContent.has(key)) byContent.set(key, {path: join(moduleDir, release, file.path), key: verified})
        }
      } finally {
        keys?.close()
      }

      for (const part of releaseParts(record.files)) parts.set(part.sha256, part.files)
    }
  }

  return {byContent, parts}
}

function readdirSafe(dir: string): string[] {
  try {
    return readdirSync(dir)
  } catch {
    return []
  }
}

/** A record as it is (a damaged one shares nothing: every file it lists is read back before it is shared anyway). */
function readRecordSync(moduleDir: string, release: string): InstallRecord | null {
  try {
    const record = JSON.parse(readFileSync(recordPath(moduleDir, release), 'utf8')) as InstallRecord
    return Array.isArray(record?.files) ? record : null
  } catch {
    return null
  }
}

/** Runs `work` over `items`, `limit` at a time, giving the results in the items' order. */
async function pool<T, R>(items: readonly T[], limit: number, work: (item: T) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length)
  let at = 0
  const worker = async () => {
    while (at < items.length) {
      const i = at++
      results[i] = await work(items[i])
    }
  }

  await Promise.all(Array.from({length: Math.min(limit, items.length)}, worker))
  return results
}
