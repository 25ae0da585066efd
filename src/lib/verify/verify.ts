import {lstatSync} from 'node:fs'
import {join} from 'node:path'

import {VerificationError} from '../errors.js'
import {type UntrustedEntry, isTrustedEntry, treeTrustProblem} from '../util/trusted-path.js'
import {type InstallRecord, RecordStream} from '../install/install-record.js'
import {FileChecker, type PendingCheck, stopCheckThread} from '../tree/hash-files.js'
import {type TreeEntry, type TreeFile, TreeWalk, compareBytes} from '../tree/release-tree.js'
import {CachedKeys, KeyWriter, recordFingerprint, settledKey, statFile} from './verified-cache.js'

export interface VerifyResult {
  release: string
  /** False when the tag has no install record (installed by hand): nothing to compare. */
  recorded: boolean
  ok: boolean
  modified: string[]
  missing: string[]
  extra: string[]
  /**
   * Files or directories in the tag that another user owns or can write, as one line
   * naming the first (or null): what matches its record now could be rewritten the moment
   * after. Not a mismatch: callers refuse it (77) unless --allow-untrusted.
   */
  untrusted: string | null
  /** verify: each modified file that other installed tags hold as the same file (a hard link: fetch shares files), with those tags. */
  sharedWith?: Record<string, string[]>
}

/**
 * Files checked at a time: large enough that handing a batch to the second thread costs
 * nothing measurable, small enough that what a batch holds dies young (2,048 at a time,
 * some 2 MB of them lived through collections of the young generation, and 96,000 files
 * left ~25 MB of garbage in the old one).
 */
const VERIFY_BATCH = 512

/** A recorded file, and what the check before a run knows of it. */
interface Listed {
  file: TreeFile
  /** The key it may be given once read and matched ('' for none), or the one it kept. */
  key: string
  /** False when its kept key vouches for it. */
  read: boolean
}

/** A batch of files handed to the checker, waiting for its results. */
interface Batch {
  /** The recorded files in this batch, in order. */
  listed: Listed[]
  /** Which of them are being read (by index into `listed`). */
  reading: number[]
  pending: PendingCheck
}

/**
 * Compares an installed release with its install record: files whose bytes, size or
 * executable bit changed, files that are gone, and anything added (links included).
 *
 * Memory does not grow with the number of files: the record is read a batch at a time
 * (RecordStream), the tree walked a directory at a time in the record's order (byte order
 * of the path) beside it, so that what the walk finds and the record does not list is
 * known without a set of paths; each batch is checked on two threads while the next is
 * read, and only what differs is kept. A record not in that order (none that localpuppet
 * wrote) is still verified, with the walk's remaining paths in a set.
 */
export async function verifyRelease(
  moduleDir: string,
  release: string,
  record?: InstallRecord | null,
  options: {
    judgeTrust?: boolean
    /** Keys of files read and matched before (verified-cache.ts): true uses and keeps them (plan, apply, releases), 'read' only uses them (validate writes nothing); verify reads every byte. */
    cache?: boolean | 'read'
    /** The tree as the resolution just walked it (with each file's lstat): not walked again. */
    tree?: TreeEntry[]
  } = {},
): Promise<VerifyResult> {
  const notRecorded: VerifyResult = {release, recorded: false, ok: true, modified: [], missing: [], extra: [], untrusted: null}
  if (record === null) return notRecorded
  const stream = record === undefined ? RecordStream.open(moduleDir, release) : null
  if (record === undefined && stream === null) return notRecorded
  try {
    return await verifyAgainst(moduleDir, release, stream ?? record!, options)
  } finally {
    stream?.close()
  }
}

async function verifyAgainst(
  moduleDir: string,
  release: string,
  record: RecordStream | InstallRecord,
  options: {judgeTrust?: boolean; cache?: boolean | 'read'; tree?: TreeEntry[]},
): Promise<VerifyResult> {
  const result: VerifyResult = {release, recorded: true, ok: true, modified: [], missing: [], extra: [], untrusted: null}
  const root = join(moduleDir, release)
  // Asked once: process.geteuid() per file was 6% of verify's time on 24,000 files.
  const euid = process.geteuid?.() ?? 0
  // undefined: not judged (apply has judged every entry of the modulepath already).
  const untrusted: UntrustedEntry[] | undefined = options.judgeTrust === false ? undefined : []
  const judge = (file: TreeFile, uid: number | undefined, mode: number | undefined) => {
    if (untrusted && uid !== undefined && mode !== undefined && !isTrustedEntry(uid, mode, euid)) untrusted.push({path: `${root}/${file.path}`, uid, mode})
  }

  const streamed = record instanceof RecordStream
  // With the cache (the check before a run, `releases`): a file whose stat key is the one
  // it had when last read and matched is not read again (verified-cache.ts). `verify`
  // itself reads every byte.
  const since = Date.now()
  const fingerprint = options.cache ? (streamed ? record.fingerprint() : recordFingerprint(record)) : ''
  const cached = options.cache ? CachedKeys.open(moduleDir, release, fingerprint) : null
  // Keys are written again only when one changed: the writer (a temporary file, and a read
  // of every process's maps) is opened at the first key that moved, and then takes the keys
  // passed before it from the cache, where they were all found unchanged.
  let keysChanged = cached === null
  let keys = options.cache === true && keysChanged ? KeyWriter.open(moduleDir, release, fingerprint) : null
  let passed = 0
  const tree = options.tree && !untrusted ? new ListedTree(options.tree) : new WalkedTree(root, untrusted, euid)
  const checker = new FileChecker(0, undefined, {keys: options.cache === true})
  let batch: Batch | null = null
  const begin = (listed: Listed[]): Batch => {
    const reading: number[] = []
    const paths: string[] = []
    const sizes: number[] = []
    listed.forEach(({file, read}, i) => {
      if (!read) return
      reading.push(i)
      paths.push(`${root}/${file.path}`)
      sizes.push(file.size)
    })
    return {listed, reading, pending: checker.begin(paths, sizes)}
  }

  // What the checks found: each file read is opened (never through a link) and its size and
  // mode come from the open file, so what is hashed is what was checked. Only a file of the
  // recorded size is read.
  const complete = async ({listed, reading, pending}: Batch) => {
    const checks = await pending.finish()
    checks.forEach((check, k) => {
      const entry = listed[reading[k]]
      const {file} = entry
      // The key kept must be the one of the file that was read: a file the stat saw can have
      // been put aside meanwhile (a directory above it renamed keeps its ctime), and put back later.
      if (check.key !== entry.key) entry.key = ''
      judge(file, check.uid, check.mode)
      if (check.error === 'ENOENT') result.missing.push(file.path)
      else if (check.error || check.size !== file.size || check.executable !== file.executable || check.sha256 !== file.sha256) result.modified.push(file.path)
    })
    if (keys) for (const entry of listed) keys.add(entry.key)
    else passed += listed.length
  }

  try {
    let pending: Listed[] = []
    const files = streamed ? record.files() : inBatches(record.files)
    for (const some of files) {
      for (const file of some) {
        const walked = tree.take(file.path)
        let key = ''
        let read = true
        if (options.cache) {
          const stat = walked?.stat ?? statFile(`${root}/${file.path}`)
          key = settledKey(stat, since) ? stat!.key : ''
          const before = cached?.next() ?? ''
          if (key !== before && !keysChanged) {
            keysChanged = true
            if (options.cache === true) keys = keysFromCache(moduleDir, release, fingerprint, passed)
          }

          if (key !== '' && key === before) {
            // Matched when last read, and not changed since: not read again.
            judge(file, stat!.uid, stat!.mode)
            read = false
          }
        }

        pending.push({file, key, read})
        if (pending.length === VERIFY_BATCH) {
          // The next batch is handed over before this thread joins the current one: the second thread always has work.
          const next = begin(pending)
          pending = []
          if (batch) await complete(batch)
          batch = next
        }
      }
    }

    if (pending.length > 0) {
      const next = begin(pending)
      if (batch) await complete(batch)
      batch = next
    }

    if (batch) await complete(batch)
    batch = null
    tree.rest()
  } catch (error) {
    batch?.pending.cancel()
    keys?.abort()
    throw error
  } finally {
    cached?.close()
  }

  result.extra.push(...tree.extra)
  // Empty directories are listed with a trailing slash; records made before they were
  // kept list none, and an installed tag is read-only, so none can appear by accident.
  const recordedDirs = new Set((streamed ? record.fields.dirs : record.dirs) ?? [])
  const emptyDirs = new Set(tree.emptyDirs)
  for (const dir of recordedDirs) if (!emptyDirs.has(dir)) result.missing.push(`${dir}/`)
  for (const dir of emptyDirs) if (!recordedDirs.has(dir)) result.extra.push(`${dir}/`)
  for (const list of [result.modified, result.missing, result.extra]) list.sort(compareBytes)
  result.untrusted = (untrusted && treeTrustProblem(root, `release ${release}`, untrusted, euid)?.message) ?? null
  result.ok = result.modified.length === 0 && result.missing.length === 0 && result.extra.length === 0
  // Keys are kept only for a release verified whole, and written only when they changed.
  if (keys && result.ok && keysChanged) keys.commit()
  else keys?.abort()
  return result
}

/** A key writer that starts with the first `count` keys of the cache ('' for any it no longer has: read next time). */
function keysFromCache(moduleDir: string, release: string, fingerprint: string, count: number): KeyWriter | null {
  const keys = KeyWriter.open(moduleDir, release, fingerprint)
  if (keys === null || count === 0) return keys
  const cached = CachedKeys.open(moduleDir, release, fingerprint)
  try {
    for (let i = 0; i < count; i++) keys.add(cached?.next() ?? '')
  } finally {
    cached?.close()
  }

  return keys
}

/** A record's files in memory, in batches as a RecordStream gives them. */
function* inBatches(files: TreeFile[]): Generator<TreeFile[]> {
  for (let start = 0; start < files.length; start += VERIFY_BATCH) yield files.slice(start, start + VERIFY_BATCH)
}

/**
 * The tree beside the record: take() each recorded path in turn (the entry there, if the
 * tree has one), and what the tree holds that no recorded path took is extra. Both come in
 * byte order of the path, so an entry the walk passes is one the record does not list,
 * without a set of paths; a record out of that order puts the rest of the tree in a set.
 */
abstract class TreeBeside {
  /** Paths the record does not list (anything but a directory). */
  readonly extra: string[] = []
  /** Empty directories, as their paths. */
  readonly emptyDirs: string[] = []
  private current: TreeEntry | null | undefined
  private previous: string | null = null
  /** Once the record was found out of order: what the tree holds that no recorded path took yet. */
  private unordered: Set<string> | null = null

  protected abstract next(): TreeEntry | null

  /** The entry at a recorded path, if it is one the tree holds as a file (or anything else but a directory). */
  take(path: string): TreeEntry | undefined {
    if (this.unordered) {
      this.unordered.delete(path)
      return undefined
    }

    if (this.previous !== null && compareBytes(this.previous, path) >= 0) {
      this.unordered = new Set(this.extra.splice(0))
      this.drain()
      this.unordered.delete(path)
      return undefined
    }

    this.previous = path
    if (this.current === undefined) this.current = this.next()
    while (this.current && compareBytes(this.current.path, path) < 0) {
      this.pass(this.current)
      this.current = this.next()
    }

    if (this.current && !this.current.dir && this.current.path === path) {
      const taken = this.current
      this.current = this.next()
      return taken
    }

    return undefined
  }

  /** The record ended: everything not taken is extra. */
  rest(): void {
    this.drain()
    if (this.unordered) {
      this.extra.push(...this.unordered)
      this.unordered.clear()
    }
  }

  /** Passes the rest of the tree. */
  private drain(): void {
    if (this.current === undefined) this.current = this.next()
    while (this.current) {
      this.pass(this.current)
      this.current = this.next()
    }
  }

  private pass(entry: TreeEntry): void {
    if (entry.dir) this.emptyDirs.push(entry.path)
    else if (this.unordered) this.unordered.add(entry.path)
    else this.extra.push(entry.path)
  }
}

/** The trust walk's listing (plan and apply): not walked again. */
class ListedTree extends TreeBeside {
  private at = 0
  constructor(private readonly entries: TreeEntry[]) {
    super()
  }

  protected next(): TreeEntry | null {
    return this.at < this.entries.length ? this.entries[this.at++] : null
  }
}

/**
 * The tree walked a directory at a time: everything but directories (links and other
 * things too), and the empty directories; each directory is stat'ed for its owner and
 * mode when trust is judged (the files' come from checking them). A tree or directory gone
 * meanwhile ends the walk: what it held is reported missing.
 */
class WalkedTree extends TreeBeside {
  private walk: TreeWalk | null = null
  private done = false

  constructor(
    private readonly root: string,
    private readonly untrusted: UntrustedEntry[] | undefined,
    private readonly euid: number,
  ) {
    super()
  }

  protected next(): TreeEntry | null {
    if (this.done) return null
    try {
      this.walk ??= new TreeWalk(this.root, this.untrusted && ((full) => this.judgeDir(full)))
      const found = this.walk.next()
      if (found) return {path: found.path, dir: found.entry === null}
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error
    }

    this.done = true
    return null
  }

  private judgeDir(full: string): void {
    const info = lstatSync(full, {throwIfNoEntry: false})
    if (info && !isTrustedEntry(info.uid, info.mode, this.euid)) this.untrusted!.push({path: full, uid: info.uid, mode: info.mode})
  }
}

/** One line naming the first problem, for errors that refuse a run. */
export function describeMismatch(result: VerifyResult): string {
  const [kind, path] = result.modified.length > 0 ? ['modified', result.modified[0]] : result.missing.length > 0 ? ['missing', result.missing[0]] : ['added', result.extra[0]]
  const count = result.modified.length + result.missing.length + result.extra.length
  return `${result.release}/${path}: ${kind} since install${count > 1 ? ` (and ${count - 1} more)` : ''}`
}

/**
 * A tagged release that was installed with a record must still be what was installed:
 * every release on a modulepath that has a record is verified, and a mismatch is a
 * VerificationError (65) naming the file. Returns the releases checked.
 */
export async function verifyModulepath(
  moduleDir: string,
  releases: Array<{release: string; kind: string}>,
  trees?: Map<string, TreeEntry[]>,
  options: {
    /** false: the verification keys kept before are used, none are kept (validate writes nothing). */
    keepKeys?: boolean
  } = {},
): Promise<Array<{release: string; verified: boolean}>> {
  const checked: Array<{release: string; verified: boolean}> = []
  try {
    for (const release of releases) {
      if (release.kind !== 'tag') continue
      // Who owns and can write each entry: judged with the whole modulepath before (run-plan).
      const result = await verifyRelease(moduleDir, release.release, undefined, {judgeTrust: false, cache: options.keepKeys === false ? 'read' : true, tree: trees?.get(release.release)})
      if (!result.recorded) continue
      if (!result.ok) throw new VerificationError(describeMismatch(result), [`localpuppet verify ${release.release} lists every difference, the other tags that share a changed file, and how to repair them (remove the tags, fetch them again)`])
      checked.push({release: release.release, verified: true})
    }
  } finally {
    // apply goes on for as long as Puppet runs: the hashing thread's memory is not kept meanwhile.
    stopCheckThread()
  }

  return checked
}
