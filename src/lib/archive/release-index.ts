import {ReleaseError} from '../errors.js'
import {isValidVersionName} from '../release/release-ref.js'
import {type TreeFile, TreeDigest, compareBytes} from '../tree/release-tree.js'
import {type ByteSource, JsonReader, JsonStreamError, bufferSource} from '../util/json-stream.js'

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

/** What release.json says of one release, without its file list (which is read again as it is needed). */
export interface ReleaseSummary {
  release: string
  digest: string
  /** How many files it lists, and their total size. */
  files: number
  bytes: number
  /** Empty directories (format 2), sorted; absent when there are none. */
  dirs?: string[]
}

/** release.json without the file lists. */
export type IndexSummary = Omit<ReleaseIndex, 'releases'> & {releases: ReleaseSummary[]}

/**
 * Reads and checks release.json from an archive, trusting nothing, without holding its
 * file lists (17 MB for 96,000 files): every release path, file path, size and hash is
 * validated, every release digest must match its files. Files must be listed in byte order
 * of their path, as pack has always listed them: a duplicate, or a file that is also a
 * directory, is then found beside the file before it. `open` gives the bytes from their
 * start, each time it is called (a release that keeps empty directories is read twice).
 */
export function readIndex(open: () => ByteSource, label: string): IndexSummary {
  const fail = (why: string): never => {
    throw new ReleaseError(`${label}: ${RELEASE_INDEX}: ${why}`)
  }

  try {
    return readIndexFrom(open, fail)
  } catch (error) {
    if (error instanceof JsonStreamError) return fail(`not valid JSON (${error.message})`)
    throw error
  }
}

/** readIndex of bytes in memory. */
export function parseIndex(bytes: Buffer, label: string): IndexSummary {
  if (bytes.length > MAX_INDEX_BYTES) throw new ReleaseError(`${label}: ${RELEASE_INDEX}: too large`)
  return readIndex(() => bufferSource(bytes), label)
}

function readIndexFrom(open: () => ByteSource, fail: (why: string) => never): IndexSummary {
  const reader = new JsonReader(open())
  const head: Record<string, unknown> = {}
  const releases: ReleaseSummary[] = []
  let listed = false
  const seen = new Set<string>()
  try {
    reader.enterObject()
  } catch (error) {
    if (error instanceof JsonStreamError) fail('not an object')
    throw error
  }

  for (let key; (key = reader.key()) !== null; ) {
    if (key !== 'releases') {
      head[key] = reader.value()
      continue
    }

    listed = true
    if ('format' in head && head.format !== INDEX_FORMAT && head.format !== INDEX_FORMAT_DIRS) break
    try {
      reader.enterArray()
    } catch (error) {
      if (error instanceof JsonStreamError) fail('lists no releases')
      throw error
    }

    while (reader.nextElement()) releases.push(readRelease(reader, releases.length, seen, head.format, fail))
  }

  const index = {...head, releases} as IndexSummary
  if (index.format !== INDEX_FORMAT && index.format !== INDEX_FORMAT_DIRS) {
    fail(`format ${JSON.stringify(index.format)} is not supported (this localpuppet reads formats ${INDEX_FORMAT} and ${INDEX_FORMAT_DIRS})`)
  }

  if (!listed || releases.length === 0) fail('lists no releases')
  reader.finish()
  if (!Array.isArray(index.modulepath)) fail('modulepath is not a list')
  const app = parseReleasePath(String(index.release))
  if (!app || app.app !== index.app || (app.kind === 'tag' ? app.name !== index.tag : index.tag !== null)) fail(`release ${JSON.stringify(index.release)} does not match app and tag`)
  // Empty directories against the files: read again for a release that keeps any (few do).
  releases.forEach((entry, i) => {
    if (entry.dirs) checkDirs(entry, indexFiles(open, i), fail)
  })
  if (index.modulepath.length !== releases.length || index.modulepath.some((path, i) => path !== releases[i].release)) fail('modulepath does not match the releases listed')
  if (index.modulepath[0] !== index.release) fail('the app is not first on the modulepath')
  return index
}

/** One release of release.json, its files checked and hashed as they come. */
function readRelease(reader: JsonReader, position: number, seen: Set<string>, format: unknown, fail: (why: string) => never): ReleaseSummary {
  reader.enterObject()
  const fields: Record<string, unknown> = {}
  let name = `releases[${position}]`
  // Counted, summed and hashed (treeDigest) as the files come.
  const checked = {files: 0, bytes: 0, digest: new TreeDigest()}
  let hasFiles = false
  // Paths before the current one that are prefixes of it: a file that is also a directory is one of them.
  const prefixes: string[] = []
  let previous: string | null = null
  for (let key; (key = reader.key()) !== null; ) {
    if (key !== 'files') {
      fields[key] = reader.value()
      if (key === 'release') {
        if (typeof fields.release !== 'string' || !parseReleasePath(fields.release)) fail(`invalid release ${JSON.stringify(fields.release)}`)
        name = fields.release as string
        if (seen.has(name)) fail(`release ${name} is listed twice`)
        seen.add(name)
      }

      continue
    }

    hasFiles = true
    try {
      reader.enterArray()
    } catch (error) {
      if (error instanceof JsonStreamError) fail(`${name}: files is not a list`)
      throw error
    }

    for (let batch; (batch = reader.elements()).length > 0; ) {
      for (const file of batch as TreeFile[]) {
        if (!file || typeof file.path !== 'string' || !isSafeRelativePath(file.path)) fail(`${name}: unsafe or invalid path ${JSON.stringify(file?.path)}`)
        const {path} = file
        if (previous !== null) {
          const order = compareBytes(previous, path)
          if (order === 0) fail(`${name}: ${path} is listed twice`)
          if (order > 0) fail(`${name}: ${path} is listed after ${previous}; files are listed in byte order of their path`)
        }

        while (prefixes.length > 0 && !path.startsWith(prefixes.at(-1)!)) prefixes.pop()
        for (const prefix of prefixes) if (path.charCodeAt(prefix.length) === 0x2f) fail(`${name}: ${prefix} is both a file and a directory`)
        prefixes.push(path)
        previous = path
        if (!Number.isSafeInteger(file.size) || file.size < 0) fail(`${name}/${path}: invalid size`)
        if (typeof file.sha256 !== 'string' || !/^[0-9a-f]{64}$/.test(file.sha256)) fail(`${name}/${path}: invalid sha256`)
        if (typeof file.executable !== 'boolean') fail(`${name}/${path}: invalid executable flag`)
        checked.files++
        checked.bytes += file.size
        checked.digest.file(path, file.size, file.executable, file.sha256)
      }
    }
  }

  if (typeof fields.release !== 'string') fail(`invalid release ${JSON.stringify(fields.release)}`)
  if (!hasFiles) fail(`${name}: files is not a list`)
  const dirs = fields.dirs
  if (dirs !== undefined) {
    if (format !== INDEX_FORMAT_DIRS || !Array.isArray(dirs)) fail(`${name}: dirs is not a list of a format ${INDEX_FORMAT_DIRS} index`)
    const unique = new Set<string>()
    for (const dir of dirs as unknown[]) {
      if (typeof dir !== 'string' || !isSafeRelativePath(dir)) fail(`${name}: unsafe or invalid directory ${JSON.stringify(dir)}`)
      if (unique.has(dir as string)) fail(`${name}: ${dir as string} is listed twice`)
      unique.add(dir as string)
    }

    // Only empty directories are listed: not one that holds another.
    for (const dir of unique) for (const parent of parentDirs(dir)) if (unique.has(parent)) fail(`${name}: ${parent} is listed as an empty directory but holds entries`)
  }

  if (checked.digest.end((dirs as string[] | undefined) ?? []) !== fields.digest) fail(`${name}: digest does not match its file list`)
  return {release: name, digest: fields.digest as string, files: checked.files, bytes: checked.bytes, ...(dirs === undefined ? {} : {dirs: dirs as string[]})}
}

/** `a/b/c` -> `a`, `a/b`. */
function parentDirs(path: string): string[] {
  const parents: string[] = []
  for (let i = path.indexOf('/'); i !== -1; i = path.indexOf('/', i + 1)) parents.push(path.slice(0, i))
  return parents
}

/** A release's empty directories against its files: none is a file, below a file, or holds a file. */
function checkDirs(entry: ReleaseSummary, files: Iterable<{file: TreeFile}>, fail: (why: string) => never): void {
  const dirs = new Set(entry.dirs)
  const above = new Set(entry.dirs!.flatMap((dir) => parentDirs(dir)))
  for (const {file: {path}} of files) {
    if (dirs.has(path)) fail(`${entry.release}: ${path} is listed twice`)
    if (above.has(path)) fail(`${entry.release}: ${path} is both a file and a directory`)
    for (const parent of parentDirs(path)) if (dirs.has(parent)) fail(`${entry.release}: ${parent} is listed as an empty directory but holds entries`)
  }
}

/**
 * The files release.json lists, in its order (release by release), read again from its
 * bytes a batch at a time; only those of release `only` when given. The index was checked
 * by readIndex first.
 */
export function* indexFiles(open: () => ByteSource, only?: number): Generator<{release: number; file: TreeFile}> {
  const reader = new JsonReader(open())
  reader.enterObject()
  if (!reader.seek('releases')) return
  reader.enterArray()
  for (let release = 0; reader.nextElement(); release++) {
    reader.enterObject()
    // Each release's keys are read to its end: `files` is one of them.
    while (reader.seek('files')) {
      reader.enterArray()
      for (let batch; (batch = reader.elements()).length > 0; ) {
        if (only !== undefined && release !== only) continue
        for (const file of batch as TreeFile[]) yield {release, file}
      }
    }

    // Releases after the one asked for are not read.
    if (only !== undefined && release === only) return
  }
}

/** Empty directories by archive path (`foo/tags/1.0.0/files/empty`). */
export function indexDirs(index: IndexSummary): Set<string> {
  return new Set(index.releases.flatMap((entry) => (entry.dirs ?? []).map((dir) => `${entry.release}/${dir}`)))
}
