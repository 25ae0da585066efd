import {createHash} from 'node:crypto'
import {gunzipSync} from 'node:zlib'

import {ReleaseError} from '../errors.js'
import {isSafeRelativePath} from '../archive/release-index.js'
import {type TreeFile, TreeDigest, compareBytes} from '../tree/release-tree.js'

/*
 * A repository's content-addressed objects: every file of every tag published, once per
 * distinct content, at `objects/<first two hex digits>/<sha256>.gz` (gzip of the bytes
 * whose sha256 names it), beside the archives. A tag's file list travels the same way, cut
 * by the first segment of the path (a module): a part is one object, and a tag's manifest
 * (its releases, their digests and empty directories, and their parts) another, which the
 * signed index names by sha256 (`objects` of the tag). A node rebuilds the parts of the
 * tags it has from their install records, so it downloads only the parts that changed and
 * the files it has nowhere; the tree digest of the list it assembles must be the signed
 * index's, or the list is refused.
 */

/** What the signed index says of a tag's objects: its manifest's sha256 and size (of the uncompressed JSON). */
export interface TagObjects {
  manifest: string
  size: number
}

/** One part of a release's file list: the files whose path starts with `prefix/` (or, for '', the files at the release's root). */
export interface PartRef {
  prefix: string
  files: number
  /** sha256 and size of the part's JSON. */
  sha256: string
  size: number
}

export interface ManifestRelease {
  release: string
  digest: string
  dirs?: string[]
  parts: PartRef[]
}

export const MANIFEST_FORMAT = 1

export interface Manifest {
  format: typeof MANIFEST_FORMAT
  releases: ManifestRelease[]
}

/** A manifest or a part larger than this is refused before it is read. */
export const MAX_LIST_OBJECT_BYTES = 64 * 1024 * 1024
/** A file larger than this is not fetched as an object (it is held in memory): its tag comes as an archive. */
export const MAX_FILE_OBJECT_BYTES = 16 * 1024 * 1024

const SHA256 = /^[0-9a-f]{64}$/

/** `objects/ab/ab12….gz` */
export function objectPath(sha256: string): string {
  return `objects/${sha256.slice(0, 2)}/${sha256}.gz`
}

export function sha256Of(bytes: Buffer): string {
  return createHash('sha256').update(bytes).digest('hex')
}

/** The first segment of a path, '' for a file at the release's root. */
export function prefixOf(path: string): string {
  const slash = path.indexOf('/')
  return slash === -1 ? '' : path.slice(0, slash)
}

/** A part's bytes: its files, in the order given (byte order of the path), as `[path, size, 0|1, sha256]`. */
export function serializePart(files: readonly TreeFile[]): Buffer {
  return Buffer.from(JSON.stringify(files.map((file) => [file.path, file.size, file.executable ? 1 : 0, file.sha256])))
}

/** A release's files (in byte order) cut into parts by prefix: each part's bytes, in order of first appearance. */
export function releaseParts(files: Iterable<TreeFile>): Array<{prefix: string; files: TreeFile[]; bytes: Buffer; sha256: string}> {
  const byPrefix = new Map<string, TreeFile[]>()
  for (const file of files) {
    const prefix = prefixOf(file.path)
    let list = byPrefix.get(prefix)
    if (!list) byPrefix.set(prefix, (list = []))
    list.push(file)
  }

  return [...byPrefix].map(([prefix, list]) => {
    const bytes = serializePart(list)
    return {prefix, files: list, bytes, sha256: sha256Of(bytes)}
  })
}

export function serializeManifest(manifest: Manifest): Buffer {
  return Buffer.from(JSON.stringify(manifest))
}

/**
 * An object's bytes as downloaded (gzip), decompressed no further than the size expected
 * and checked against its sha256: anything else is a ReleaseError (65) naming where.
 */
export function openObject(compressed: Buffer, expected: {sha256: string; size: number}, where: string): Buffer {
  let bytes: Buffer
  try {
    bytes = gunzipSync(compressed, {maxOutputLength: Math.max(1, expected.size + 1)})
  } catch (error) {
    throw new ReleaseError(`${where}: does not match the signed index (not gzip of ${expected.size} bytes: ${(error as Error).message}); refused`)
  }

  if (bytes.length !== expected.size || sha256Of(bytes) !== expected.sha256) {
    throw new ReleaseError(`${where}: does not match the signed index (sha256 ${sha256Of(bytes)}, ${bytes.length} bytes; expected ${expected.sha256}, ${expected.size} bytes); refused`)
  }

  return bytes
}

/** The most compressed bytes believed for an object of `size` bytes (deflate's worst case, with room). */
export function maxCompressed(size: number): number {
  return size + Math.ceil(size / 100) + 1024
}

/** Parses a manifest checked by sha256 already, trusting its shape no further than its checks. */
export function parseManifest(bytes: Buffer, where: string): Manifest {
  const fail = (why: string): never => {
    throw new ReleaseError(`${where}: ${why}; refused`)
  }

  let doc: Manifest
  try {
    doc = JSON.parse(bytes.toString('utf8')) as Manifest
  } catch (error) {
    return fail(`not valid JSON (${(error as Error).message})`)
  }

  if (typeof doc !== 'object' || doc === null || doc.format !== MANIFEST_FORMAT || !Array.isArray(doc.releases)) fail('not a manifest of format 1')
  for (const release of doc.releases) {
    if (typeof release?.release !== 'string' || typeof release.digest !== 'string' || !Array.isArray(release.parts)) fail('a release without its name, digest or parts')
    if (release.dirs !== undefined && (!Array.isArray(release.dirs) || release.dirs.some((dir) => typeof dir !== 'string' || !isSafeRelativePath(dir)))) fail(`${release.release}: invalid dirs`)
    const prefixes = new Set<string>()
    for (const part of release.parts) {
      if (typeof part?.prefix !== 'string' || (part.prefix !== '' && !isSafeRelativePath(part.prefix)) || part.prefix.includes('/')) fail(`${release.release}: invalid part ${JSON.stringify(part?.prefix)}`)
      if (prefixes.has(part.prefix)) fail(`${release.release}: part ${part.prefix} listed twice`)
      prefixes.add(part.prefix)
      if (typeof part.sha256 !== 'string' || !SHA256.test(part.sha256)) fail(`${release.release}: part ${part.prefix}: invalid sha256`)
      if (!Number.isSafeInteger(part.size) || part.size < 0 || part.size > MAX_LIST_OBJECT_BYTES) fail(`${release.release}: part ${part.prefix}: invalid size`)
      if (!Number.isSafeInteger(part.files) || part.files < 1) fail(`${release.release}: part ${part.prefix}: invalid file count`)
    }
  }

  return doc
}

/** A part's files, checked: each under its prefix, a safe path, a size, a flag and a sha256, as many as the manifest says. */
export function parsePart(bytes: Buffer, part: PartRef, where: string): TreeFile[] {
  const fail = (why: string): never => {
    throw new ReleaseError(`${where}: ${why}; refused`)
  }

  let rows: unknown
  try {
    rows = JSON.parse(bytes.toString('utf8'))
  } catch (error) {
    return fail(`not valid JSON (${(error as Error).message})`)
  }

  if (!Array.isArray(rows) || rows.length !== part.files) fail(`not a list of ${part.files} files`)
  return (rows as unknown[]).map((row) => {
    if (!Array.isArray(row) || row.length !== 4) return fail('a file is not [path, size, executable, sha256]')
    const [path, size, executable, sha256] = row as [unknown, unknown, unknown, unknown]
    if (typeof path !== 'string' || !isSafeRelativePath(path) || prefixOf(path) !== part.prefix) return fail(`unsafe path, or one outside part ${JSON.stringify(part.prefix)}: ${JSON.stringify(path)}`)
    if (!Number.isSafeInteger(size) || (size as number) < 0) return fail(`${path}: invalid size`)
    if (executable !== 0 && executable !== 1) return fail(`${path}: invalid executable flag`)
    if (typeof sha256 !== 'string' || !SHA256.test(sha256)) return fail(`${path}: invalid sha256`)
    return {path, size: size as number, executable: executable === 1, sha256}
  })
}

/**
 * A release's whole file list from its parts, in byte order, checked against the digest the
 * signed index gives: a list that is not exactly the signed one is refused (65).
 */
export function assembleRelease(release: ManifestRelease, parts: TreeFile[][], signedDigest: string, where: string): TreeFile[] {
  const files = parts.flat().sort((a, b) => compareBytes(a.path, b.path))
  const digest = new TreeDigest()
  for (let i = 0; i < files.length; i++) {
    if (i > 0 && files[i - 1].path === files[i].path) throw new ReleaseError(`${where}: ${release.release}/${files[i].path} is listed twice; refused`)
    digest.file(files[i].path, files[i].size, files[i].executable, files[i].sha256)
  }

  const got = digest.end(release.dirs ?? [])
  if (got !== signedDigest) throw new ReleaseError(`${where}: the file list of ${release.release} does not match the signed index (digest ${got}; the index says ${signedDigest}); refused`)
  return files
}
