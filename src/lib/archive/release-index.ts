import {ReleaseError} from '../errors.js'
import {isValidVersionName} from '../release/release-ref.js'
import {type TreeFile, compareBytes, treeDigest} from '../tree/release-tree.js'

/** The archive's table of contents, its first entry. */
export const RELEASE_INDEX = 'release.json'
/** The detached signature over release.json's bytes, its second entry when signed. */
export const SIGNATURE_FILE = 'release.json.sig'
export const INDEX_FORMAT = 1
/** release.json of a release that keeps empty directories (`dirs`): older readers refuse it by its format. */
export const INDEX_FORMAT_DIRS = 2
/** release.json larger than this is refused before parsing (10,000 files need ~2 MiB). */
export const MAX_INDEX_BYTES = 64 * 1024 * 1024

export interface IndexedRelease {
  /** `foo/tags/1.0.0` (or `foo/trunk` in an archive packed with --allow-mutable). */
  release: string
  digest: string
  files: TreeFile[]
  /** Empty directories (format 2), sorted; absent when there are none. */
  dirs?: string[]
}

/** release.json: what an archive holds, release by release, file by file. */
export interface ReleaseIndex {
  format: typeof INDEX_FORMAT | typeof INDEX_FORMAT_DIRS
  app: string
  /** The app's tag, or null when a mutable release was packed (--allow-mutable). */
  tag: string | null
  /** The app's release path. */
  release: string
  /** The resolved modulepath, app first, as release paths relative to a module directory. */
  modulepath: string[]
  releases: IndexedRelease[]
}

const RELEASE_PATH = /^([A-Za-z0-9][A-Za-z0-9_.-]{0,127})\/(?:trunk|(?:tags|branches)\/([^/]+))$/

/** Parses a release path (`foo/tags/1.0.0`, `foo/trunk`, `foo/branches/x`) into its parts, or null. */
export function parseReleasePath(text: string): {app: string; kind: 'trunk' | 'branch' | 'tag'; name: string | null} | null {
  const match = RELEASE_PATH.exec(text)
  if (!match) return null
  if (match[2] !== undefined && !isValidVersionName(match[2])) return null
  const kind = text.slice(match[1].length + 1).startsWith('tags/') ? 'tag' : text.endsWith('/trunk') ? 'trunk' : 'branch'
  return {app: match[1], kind, name: match[2] ?? null}
}

/**
 * A path inside a release as an archive may carry it: relative, `/`-separated, no empty,
 * `.` or `..` segments, no control characters (a newline would forge a digest line), names
 * of at most 255 bytes and at most 4096 bytes in all (as UTF-8, as file systems count them:
 * `é` is one UTF-16 code unit but two bytes, so 200 of them pass a count of code units and
 * fail at the file system, after the index that named them was accepted).
 */
export function isSafeRelativePath(path: string): boolean {
  if (path.length === 0 || path.length > 4096 || UNSAFE_PATH.test(path)) return false
  // A UTF-16 code unit is at most 3 bytes of UTF-8: a path this short cannot be too long.
  if (path.length <= 85) return true
  if (Buffer.byteLength(path) > 4096) return false
  return path.split('/').every((segment) => segment.length <= 85 || Buffer.byteLength(segment) <= 255)
}

/**
 * What makes a relative path unsafe, in one pass (pack, install and release.json check
 * thousands): a control character, an empty segment (a leading, trailing or doubled
 * slash), or a `.` or `..` segment.
 */
const UNSAFE_PATH = /[\u0000-\u001F\u007F]|^\/|\/$|\/\/|(?:^|\/)\.{1,2}(?:\/|$)/

export function serializeIndex(index: ReleaseIndex): Buffer {
  return Buffer.from(JSON.stringify(index, null, 1) + '\n')
}

/**
 * Parses and checks release.json from an archive, trusting nothing: every release path,
 * file path, size and hash is validated, and every release digest must match its files.
 */
export function parseIndex(bytes: Buffer, label: string): ReleaseIndex {
  const fail = (why: string): never => {
    throw new ReleaseError(`${label}: ${RELEASE_INDEX}: ${why}`)
  }

  if (bytes.length > MAX_INDEX_BYTES) fail('too large')
  let doc: unknown
  try {
    doc = JSON.parse(bytes.toString('utf8'))
  } catch (error) {
    return fail(`not valid JSON (${(error as Error).message})`)
  }

  const index = doc as ReleaseIndex
  if (!index || typeof index !== 'object' || Array.isArray(index)) fail('not an object')
  if (index.format !== INDEX_FORMAT && index.format !== INDEX_FORMAT_DIRS) {
    fail(`format ${JSON.stringify(index.format)} is not supported (this localpuppet reads formats ${INDEX_FORMAT} and ${INDEX_FORMAT_DIRS})`)
  }

  if (!Array.isArray(index.releases) || index.releases.length === 0) fail('lists no releases')
  if (!Array.isArray(index.modulepath)) fail('modulepath is not a list')
  const app = parseReleasePath(String(index.release))
  if (!app || app.app !== index.app || (app.kind === 'tag' ? app.name !== index.tag : index.tag !== null)) fail(`release ${JSON.stringify(index.release)} does not match app and tag`)

  const seen = new Set<string>()
  for (const entry of index.releases) {
    if (!entry || typeof entry.release !== 'string' || !parseReleasePath(entry.release)) fail(`invalid release ${JSON.stringify(entry?.release)}`)
    if (seen.has(entry.release)) fail(`release ${entry.release} is listed twice`)
    seen.add(entry.release)
    if (!Array.isArray(entry.files)) fail(`${entry.release}: files is not a list`)
    const paths = new Set<string>()
    for (const file of entry.files) {
      if (!file || typeof file.path !== 'string' || !isSafeRelativePath(file.path)) fail(`${entry.release}: unsafe or invalid path ${JSON.stringify(file?.path)}`)
      if (paths.has(file.path)) fail(`${entry.release}: ${file.path} is listed twice`)
      paths.add(file.path)
      if (!Number.isSafeInteger(file.size) || file.size < 0) fail(`${entry.release}/${file.path}: invalid size`)
      if (typeof file.sha256 !== 'string' || !/^[0-9a-f]{64}$/.test(file.sha256)) fail(`${entry.release}/${file.path}: invalid sha256`)
      if (typeof file.executable !== 'boolean') fail(`${entry.release}/${file.path}: invalid executable flag`)
    }

    // A file and a directory of the same name cannot both exist.
    const parents = new Set<string>()
    for (const path of paths) {
      for (let i = path.indexOf('/'); i !== -1; i = path.indexOf('/', i + 1)) {
        if (paths.has(path.slice(0, i))) fail(`${entry.release}: ${path.slice(0, i)} is both a file and a directory`)
        parents.add(path.slice(0, i))
      }
    }

    if (entry.dirs !== undefined) {
      if (index.format !== INDEX_FORMAT_DIRS || !Array.isArray(entry.dirs)) fail(`${entry.release}: dirs is not a list of a format ${INDEX_FORMAT_DIRS} index`)
      const dirs = new Set<string>()
      for (const dir of entry.dirs!) {
        if (typeof dir !== 'string' || !isSafeRelativePath(dir)) fail(`${entry.release}: unsafe or invalid directory ${JSON.stringify(dir)}`)
        if (dirs.has(dir) || paths.has(dir)) fail(`${entry.release}: ${dir} is listed twice`)
        dirs.add(dir)
        for (let i = dir.indexOf('/'); i !== -1; i = dir.indexOf('/', i + 1)) {
          if (paths.has(dir.slice(0, i))) fail(`${entry.release}: ${dir.slice(0, i)} is both a file and a directory`)
          parents.add(dir.slice(0, i))
        }
      }

      // Only empty directories are listed: the others follow from the paths below them.
      for (const dir of dirs) if (parents.has(dir)) fail(`${entry.release}: ${dir} is listed as an empty directory but holds entries`)
    }

    if (treeDigest(entry.files, entry.dirs ?? []) !== entry.digest) fail(`${entry.release}: digest does not match its file list`)
  }

  if (index.modulepath.length !== index.releases.length || index.modulepath.some((path, i) => path !== index.releases[i].release)) {
    fail('modulepath does not match the releases listed')
  }

  if (index.modulepath[0] !== index.release) fail('the app is not first on the modulepath')
  return index
}

/** Empty directories by archive path (`foo/tags/1.0.0/files/empty`). */
export function indexDirs(index: ReleaseIndex): Set<string> {
  return new Set(index.releases.flatMap((entry) => (entry.dirs ?? []).map((dir) => `${entry.release}/${dir}`)))
}

/** Archive entry names in the order pack writes them: release by release, files sorted. */
export function archivePaths(index: ReleaseIndex): string[] {
  return index.releases.flatMap((entry) => [...entry.files].sort((a, b) => compareBytes(a.path, b.path)).map((file) => `${entry.release}/${file.path}`))
}
