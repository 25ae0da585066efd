import {createHash, randomBytes} from 'node:crypto'
import {createWriteStream} from 'node:fs'
import {rename, unlink} from 'node:fs/promises'
import {basename, dirname, join, resolve} from 'node:path'
import {Transform, type Writable} from 'node:stream'
import {pipeline} from 'node:stream/promises'

import {Header, Pack, ReadEntry} from 'tar'

import {ImmutabilityError, ReleaseError, describeFsError} from '../errors.js'
import {parseReleaseRef} from '../release/release-ref.js'
import {resolveRelease} from '../release/resolve.js'
import {type ReleaseIndex, INDEX_FORMAT, RELEASE_INDEX, SIGNATURE_FILE, serializeIndex} from './release-index.js'
import {type TreeFile, readReleaseTree, treeDigest} from './release-tree.js'
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
 * release.json first (and release.json.sig when signing), then each release's files in
 * byte order of path, with fixed metadata (no owners, no mtimes, mode 0644 or 0755) and a
 * fixed gzip header. The same tree gives the same bytes. Files are streamed: memory does
 * not grow with the release. The archive appears only when complete.
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
  const releases = []
  for (const entry of resolution.modulepath) {
    const files = await readReleaseTree(entry.path, entry.release)
    releases.push({release: entry.release, digest: treeDigest(files), files})
  }

  const tag = app.kind === 'tag' ? app.release.slice(`${app.app}/tags/`.length) : null
  const index: ReleaseIndex = {format: INDEX_FORMAT, app: app.app, tag, release: app.release, modulepath: releases.map((r) => r.release), releases}
  const indexBytes = serializeIndex(index)

  const pack = new Pack({
    cwd: resolution.moduleDir,
    portable: true,
    noMtime: true,
    noDirRecurse: true,
    strict: true,
    gzip: {level: GZIP_LEVEL},
    // Small reads, few files at once: memory stays flat however large the release.
    jobs: 2,
    maxReadSize: 1024 * 1024,
    onWriteEntry: (entry) => {
      const problem = normalizeEntry(entry, expected)
      if (problem) pack.destroy(problem)
    },
  })
  const expected = new Map<string, TreeFile>()
  pack.add(memoryEntry(RELEASE_INDEX, indexBytes))
  if (key) pack.add(memoryEntry(SIGNATURE_FILE, signIndex(indexBytes, key)))
  for (const release of releases) {
    for (const file of release.files) {
      const path = `${release.release}/${file.path}`
      expected.set(join(resolution.moduleDir, path), file)
      pack.add(path)
    }
  }

  pack.end()

  // Hashing in the pipeline itself: a 'data' listener on the pack would start it flowing
  // before the destination is attached, and the first bytes would miss the file.
  const hash = createHash('sha256')
  let bytes = 0
  const measure = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      hash.update(chunk)
      bytes += chunk.length
      callback(null, chunk)
    },
  })

  const result = {release: app.release, sha256: '', bytes: 0, index, signedBy: key ? keyId(key) : null}
  if (options.output === null) {
    await pipeline(pack, measure, options.to!, {end: false})
    return {...result, output: null, sha256: hash.digest('hex'), bytes}
  }

  const output = resolve(options.output ?? defaultArchiveName(app.release))
  const temp = join(dirname(output), `.${basename(output)}.${randomBytes(4).toString('hex')}.tmp`)
  try {
    await pipeline(pack, measure, createWriteStream(temp, {flags: 'wx', mode: 0o644}))
    await rename(temp, output)
  } catch (error) {
    await unlink(temp).catch(() => {})
    // Creating or renaming the archive itself (a missing directory, a directory in the way).
    if ((error as NodeJS.ErrnoException).path === temp) throw describeFsError(error, `output ${output}`)
    throw error
  }

  return {...result, output, sha256: hash.digest('hex'), bytes}
}

function memoryEntry(path: string, data: Buffer): ReadEntry {
  const entry = new ReadEntry(new Header({path, mode: 0o644, size: data.length, type: 'File'}))
  entry.end(data)
  return entry
}

/** Fixes the mode; a file that changed since it was hashed is an error that stops the pack. */
function normalizeEntry(entry: {absolute?: string; stat?: {mode: number; size: number; isFile(): boolean}}, expected: Map<string, TreeFile>): Error | null {
  const {stat, absolute} = entry
  if (!stat || !absolute) return null
  const file = expected.get(absolute)
  if (!file || !stat.isFile() || stat.size !== file.size) return new ReleaseError(`${absolute}: changed while packing; pack again`)
  stat.mode = file.executable ? 0o100755 : 0o100644
  return null
}

/** `foo/tags/1.4.0` packs to `foo-1.4.0.tar.gz`, `foo/trunk` to `foo-trunk.tar.gz`. */
export function defaultArchiveName(release: string): string {
  return `${release.replace(/\/(?:tags|branches)\//, '-').replace(/\//g, '-')}.tar.gz`
}
