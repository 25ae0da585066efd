import {createHash} from 'node:crypto'
import {type Dirent, type Stats, lstatSync, readdirSync} from 'node:fs'

import {LocalpuppetError, ReleaseError} from '../errors.js'
import {asIoError} from '../util/io-error.js'
import {displayPath} from '../util/shell-quote.js'
import {type UntrustedEntry, isTrustedEntry} from '../util/trusted-path.js'
import {FileChecker} from './hash-files.js'


/** One file of a release, as release.json and install records list it. */
export interface TreeFile {
  /** Relative to the release root, `/`-separated. */
  path: string
  size: number
  executable: boolean
  sha256: string
}

/** What a release root holds: its files and its empty directories. */
export interface ReleaseContent {
  files: TreeFile[]
  /**
   * Directories with nothing in them, sorted (byte order), without a trailing slash.
   * Other directories are implied by the paths of the files they hold.
   */
  dirs: string[]
}

/**
 * Every regular file under a release root, sorted by path (byte order), with size,
 * executable bit and sha256. Anything that is neither a regular file nor a directory
 * (symlink, device, socket, FIFO) is refused with a message naming it: a release must
 * mean the same bytes wherever it is unpacked. Empty directories are not listed here;
 * readReleaseContent lists them too.
 */
export async function readReleaseTree(root: string, label: string): Promise<TreeFile[]> {
  return (await readReleaseContent(root, label)).files
}

/**
 * Files and empty directories under a release root, each file's size, executable bit and
 * sha256 taken from the one open file (two cores at once for large trees): no stat before
 * the hashing, so what is listed is what was hashed.
 */
export async function readReleaseContent(root: string, label: string): Promise<ReleaseContent> {
  const paths: string[] = []
  const dirs: string[] = []
  for (const entry of listEntries(root, label)) (entry.dir ? dirs : paths).push(entry.path)
  // Archive order is byte order of the path for files; empty directories are listed by their own.
  dirs.sort(compareBytes)
  const checks = await new FileChecker(paths.length).check(paths.map((path) => `${root}/${path}`))
  const files = paths.map((path, i): TreeFile => {
    const {sha256, size, executable} = checks[i]
    // Listed as a regular file a moment ago: gone, replaced or cut short since.
    if (sha256 === null) throw new ReleaseError(`${label}/${path}: changed while it was read; try again`)
    return {path, size, executable, sha256}
  })
  return {files, dirs}
}

/** One thing a release holds: a regular file, or a directory with nothing in it. */
export interface TreeEntry {
  /** Relative to the release root, `/`-separated, without a trailing slash. */
  path: string
  /** True for an empty directory. */
  dir: boolean
  /** When trust was judged: the file's lstat, as the check before a run keys its cache (verify/verified-cache.ts). */
  stat?: FileStat
}

/** What verification keeps of a file's lstat. */
export interface FileStat {
  /** What any change to the file's bytes, mode or owner changes; '' when it is not a regular file. */
  key: string
  uid: number
  mode: number
  /** The later of its mtime and ctime, in ms. */
  changedMs: number
}

/**
 * A file's stat key: device, inode, size, mode, owner, mtime and ctime. Times in
 * milliseconds with the fraction Node gives: a change made after a key was kept sets a
 * ctime well after it (verified-cache.ts keeps no key younger than two seconds).
 */
export function fileStat(info: Stats): FileStat {
  const key = info.isFile() ? `${info.dev}:${info.ino}:${info.size}:${info.mode}:${info.uid}:${info.mtimeMs}:${info.ctimeMs}` : ''
  return {key, uid: info.uid, mode: info.mode, changedMs: Math.max(info.mtimeMs, info.ctimeMs)}
}

/** What a TreeWalk finds: anything but a directory (its directory entry), or a directory with nothing in it (entry null). */
export interface WalkedEntry {
  /** Relative to the root, `/`-separated. */
  path: string
  /** The absolute path. */
  full: string
  entry: Dirent | null
}

/**
 * A tree walked in the order an archive and an install record list it (byte order of the
 * path, a directory sorting as `name/`), one entry at a time: each directory is read when
 * the walk gets to it, so memory holds the directories on the way down, not the tree.
 * `onDirectory` is called on each directory below the root before it is read. Directory
 * entries carry the type (Node stats the rare file system that leaves it unknown).
 */
export class TreeWalk {
  /** Where the walk is: the path (relative) being read or last returned, for messages. */
  at = ''
  private readonly stack: Array<{dir: string; prefix: string; entries: Dirent[]; next: number}> = []

  constructor(
    root: string,
    private readonly onDirectory?: (full: string) => void,
  ) {
    this.stack.push({dir: root, prefix: '', entries: sortedEntries(root), next: 0})
  }

  /** The next entry, or null at the end. */
  next(): WalkedEntry | null {
    for (;;) {
      const top = this.stack.at(-1)
      if (!top) return null
      if (top.next === top.entries.length) {
        this.stack.pop()
        continue
      }

      const entry = top.entries[top.next++]
      const path = top.prefix === '' ? entry.name : `${top.prefix}/${entry.name}`
      const full = `${top.dir}/${entry.name}`
      this.at = path
      if (!entry.isDirectory()) return {path, full, entry}
      this.onDirectory?.(full)
      const entries = sortedEntries(full)
      if (entries.length === 0) return {path, full, entry: null}
      this.stack.push({dir: full, prefix: path, entries, next: 0})
    }
  }
}

/**
 * A directory's entries in the order their paths sort: byte order, a directory as `name/`
 * (so that `a-b` comes before `a/x`, as it does in a sorted list of paths).
 */
function sortedEntries(dir: string): Dirent[] {
  const keyed = readdirSync(dir, {withFileTypes: true}).map((entry) => ({key: entry.isDirectory() ? `${entry.name}/` : entry.name, entry}))
  return keyed.sort((a, b) => compareBytes(a.key, b.key)).map(({entry}) => entry)
}

/**
 * The regular files and empty directories under a root, in the order an archive holds
 * them (byte order of the path, a directory as `path/`), from directory entries alone:
 * no stat per file, and one directory read at a time (TreeWalk). Anything else (symlink,
 * device, socket, FIFO) is refused, naming it: a release must mean the same bytes
 * wherever it is unpacked. This is the one rule plan, validate, apply and pack apply to a
 * release tree. With `untrusted` (plan and apply, which run the tree as root), each entry
 * is also stat'ed, and those another user owns or can write are added to it.
 */
export function* treeEntries(root: string, label: string, untrusted?: UntrustedEntry[]): Generator<TreeEntry> {
  // Synchronous on purpose: one system call after another is several times faster than
  // a promise per directory, and nothing else runs meanwhile in a CLI.
  // Judging trust, the walk goes on past an entry of the wrong kind, so that the caller
  // sees everything that is not trusted (77) before that (65): both may be the attack.
  let wrongKind: ReleaseError | null = null
  const euid = process.geteuid?.() ?? 0
  let walk: TreeWalk | undefined
  try {
    walk = new TreeWalk(root, untrusted && ((full) => checkTrust(full, untrusted, euid)))
    for (let found; (found = walk.next()) !== null; ) {
      const {path, full, entry} = found
      if (entry === null) {
        yield {path, dir: true}
        continue
      }

      const stat = untrusted ? checkTrust(full, untrusted, euid) : undefined
      if (entry.isFile()) yield stat ? {path, dir: false, stat: fileStat(stat)} : {path, dir: false}
      else {
        wrongKind ??= new ReleaseError(`${displayPath(`${label}/${path}`)}: ${describeKind(entry)}; a release may hold only regular files and directories`)
        if (!untrusted) throw wrongKind
      }
    }

    if (wrongKind) throw wrongKind
  } catch (error) {
    const at = walk?.at ?? ''
    throw treeReadError(error, displayPath(at === '' ? label : `${label}/${at}`))
  }
}

/** treeEntries, all of them (plan, validate and apply judge and keep the whole tree). */
export function listEntries(root: string, label: string, untrusted?: UntrustedEntry[]): TreeEntry[] {
  return [...treeEntries(root, label, untrusted)]
}

export {hashFileSync} from './hash-files.js'

/**
 * What a failure to read a release tree means (the tree itself is named when it is
 * missing before this): changed under the walk (65), unreadable (65), a disk that
 * fails (74). Never an internal error: anyone who can write the tree can cause them.
 */
function treeReadError(error: unknown, where: string): Error {
  if (error instanceof LocalpuppetError) return error
  const io = asIoError(error, where)
  if (io) return io
  const code = (error as NodeJS.ErrnoException)?.code
  if (code === 'ENOENT' || code === 'ENOTDIR') return new ReleaseError(`${where}: changed while it was read; try again`)
  if (code === 'EACCES' || code === 'EPERM') return new ReleaseError(`${where}: cannot be read (permission denied)`)
  if (code === 'ENAMETOOLONG') return new ReleaseError(`${where.slice(0, 200)}...: a path too long to read`)
  if (typeof code === 'string') return new ReleaseError(`${where}: cannot be read (${code})`)
  return error as Error
}

/**
 * Adds `path` to `untrusted` when another user owns it or can write it (a path gone
 * meanwhile is the verification's business); returns its lstat.
 */
function checkTrust(path: string, untrusted: UntrustedEntry[], euid: number): Stats | undefined {
  const info = lstatSync(path, {throwIfNoEntry: false})
  // A link's own mode means nothing (and a release may not hold one: the walk refuses it).
  if (info && !info.isSymbolicLink() && !isTrustedEntry(info.uid, info.mode, euid)) untrusted.push({path, uid: info.uid, mode: info.mode})
  return info
}

/**
 * The digest of a release: sha256 over one line per file, sorted by path:
 * `<sha256> <size> <x|-> <path>\n`, then one `dir <path>/\n` per empty directory. Two
 * trees have the same digest exactly when they hold the same paths with the same bytes
 * and executable bits, and the same empty directories.
 */
export function treeDigest(files: TreeFile[], dirs: readonly string[] = []): string {
  const sorted = files.every((file, i) => i === 0 || compareBytes(files[i - 1].path, file.path) < 0) ? files : [...files].sort((a, b) => compareBytes(a.path, b.path))
  const digest = new TreeDigest()
  for (const file of sorted) digest.file(file.path, file.size, file.executable, file.sha256)
  return digest.end(dirs)
}

/**
 * treeDigest computed as the files come, in byte order of their path (pack writing
 * release.json, install reading it): nothing kept per file. Lines are gathered some 64 KiB
 * at a time: thousands of small updates cost more than the hashing, and one string of all
 * of them (15 MB for 100,000 files) is memory that grows with the release.
 */
export class TreeDigest {
  private readonly hash = createHash('sha256')
  private lines = ''

  file(path: string, size: number, executable: boolean, sha256: string): void {
    this.lines += `${sha256} ${size} ${executable ? 'x' : '-'} ${path}\n`
    if (this.lines.length >= 64 * 1024) {
      this.hash.update(this.lines)
      this.lines = ''
    }
  }

  /** The digest, with the release's empty directories (in any order). */
  end(dirs: readonly string[] = []): string {
    this.hash.update(this.lines)
    this.lines = ''
    // Empty directories after the files, one `dir <path>/` line each: a file line starts
    // with 64 hex digits, so the two cannot be confused, and a tree without empty
    // directories keeps the digest it always had (archives and install records made
    // before directories were kept still verify).
    for (const dir of [...dirs].sort(compareBytes)) this.hash.update(`dir ${dir}/\n`)
    return `sha256:${this.hash.digest('hex')}`
  }
}

/**
 * Sorts by UTF-8 bytes, the same on every machine and locale. UTF-16 code units order
 * the same way as UTF-8 bytes below the surrogates (U+D800): compared unit by unit, with
 * no allocation; a first difference at or above U+D800 compares the UTF-8 bytes.
 */
export function compareBytes(a: string, b: string): number {
  const length = Math.min(a.length, b.length)
  for (let i = 0; i < length; i++) {
    const x = a.charCodeAt(i)
    const y = b.charCodeAt(i)
    if (x === y) continue
    if (x < 0xd800 && y < 0xd800) return x - y
    // Surrogates (and lone ones, which UTF-8 writes as U+FFFD): the bytes decide.
    return Buffer.compare(Buffer.from(a), Buffer.from(b))
  }

  return a.length - b.length
}

export function describeKind(info: {isSymbolicLink(): boolean; isBlockDevice(): boolean; isCharacterDevice(): boolean; isFIFO(): boolean; isSocket(): boolean}): string {
  if (info.isSymbolicLink()) return 'a symbolic link'
  if (info.isBlockDevice() || info.isCharacterDevice()) return 'a device'
  if (info.isFIFO()) return 'a FIFO'
  if (info.isSocket()) return 'a socket'
  return 'not a regular file'
}
