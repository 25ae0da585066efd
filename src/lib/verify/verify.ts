import {lstatSync, readdirSync} from 'node:fs'
import {join} from 'node:path'

import {VerificationError} from '../errors.js'
import {type UntrustedEntry, isTrustedEntry, treeTrustProblem} from '../util/trusted-path.js'
import {type InstallRecord, readInstallRecord} from '../install/install-record.js'
import {FileChecker, stopCheckThread} from '../tree/hash-files.js'
import {type TreeEntry, compareBytes} from '../tree/release-tree.js'
import {readVerifiedCache, recordFingerprint, settledKey, statFile, writeVerifiedCache} from './verified-cache.js'

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
}

/** Files checked at a time: large enough that handing a batch to the second thread costs nothing measurable. */
const VERIFY_BATCH = 2048

/**
 * Compares an installed release with its install record: files whose bytes, size or
 * executable bit changed, files that are gone, and anything added (links included).
 */
export async function verifyRelease(
  moduleDir: string,
  release: string,
  record?: InstallRecord | null,
  options: {
    judgeTrust?: boolean
    cache?: boolean
    /** The tree as the resolution just walked it (with each file's lstat): not walked again. */
    tree?: TreeEntry[]
  } = {},
): Promise<VerifyResult> {
  const recorded = record === undefined ? await readInstallRecord(moduleDir, release) : record
  const result: VerifyResult = {release, recorded: recorded !== null, ok: true, modified: [], missing: [], extra: [], untrusted: null}
  if (!recorded) return result
  const root = join(moduleDir, release)
  const {files} = recorded
  // Asked once: process.geteuid() per file was 6% of verify's time on 24,000 files.
  const euid = process.geteuid?.() ?? 0
  // undefined: not judged (apply has judged every entry of the modulepath already).
  const untrusted: UntrustedEntry[] | undefined = options.judgeTrust === false ? undefined : []
  const judge = (file: {path: string}, uid: number | undefined, mode: number | undefined) => {
    if (untrusted && uid !== undefined && mode !== undefined && !isTrustedEntry(uid, mode, euid)) untrusted.push({path: `${root}/${file.path}`, uid, mode})
  }

  // With the cache (the check before a run, `releases`): a file whose stat key is the one
  // it had when last read and matched is not read again (verified-cache.ts). `verify`
  // itself reads every byte.
  const since = Date.now()
  const keys: string[] | null = options.cache ? new Array<string>(files.length) : null
  const fingerprint = options.cache ? recordFingerprint(files) : ''
  const cached = options.cache ? readVerifiedCache(moduleDir, release, fingerprint, files.length) : null
  // The files to read, by index: all of them without the cache.
  let toRead: Uint32Array | null = null
  if (keys !== null) {
    const walked = options.tree ? new Map(options.tree.map((entry) => [entry.path, entry])) : null
    const indices: number[] = []
    for (let i = 0; i < files.length; i++) {
      const file = files[i]
      const entry = walked?.get(file.path)
      const stat = entry?.stat ?? statFile(`${root}/${file.path}`)
      keys[i] = settledKey(stat, since) ? stat!.key : ''
      if (cached !== null && stat && stat.key !== '' && cached.keys[i] === stat.key) judge(file, stat.uid, stat.mode)
      else indices.push(i)
    }

    toRead = Uint32Array.from(indices)
  }

  const count = toRead === null ? files.length : toRead.length
  const at = (j: number) => (toRead === null ? j : toRead[j])
  // Every file read is opened (never through a link) and its size and mode come from the
  // open file: what is hashed is what was checked. Only a file of the recorded size is
  // read. They are checked a batch at a time (two threads for a large release, the second
  // starting on the first batch while this one walks the tree for added files), and only
  // what differs is kept: memory does not grow with the number of files.
  let bytes = 0
  for (let j = 0; j < count; j++) bytes += files[at(j)].size
  const checker = new FileChecker(count, bytes)
  const batch = (start: number) => {
    const end = Math.min(count, start + VERIFY_BATCH)
    const paths: string[] = []
    const sizes: number[] = []
    for (let j = start; j < end; j++) {
      paths.push(`${root}/${files[at(j)].path}`)
      sizes.push(files[at(j)].size)
    }

    return {start, pending: checker.begin(paths, sizes)}
  }

  let current = batch(0)
  const found = new Set<string>()
  const emptyDirs = new Set<string>()
  try {
    if (options.tree && !untrusted) {
      for (const entry of options.tree) (entry.dir ? emptyDirs : found).add(entry.path)
    } else walk(root, '', found, emptyDirs, untrusted, euid)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') {
      current.pending.cancel()
      throw error
    }
  }

  // What the walk found that no record lists: every recorded path is taken out.
  for (const file of files) found.delete(file.path)
  while (current.start < count) {
    // The next batch is handed over before this thread joins the current one: the second
    // thread always has work.
    const next = current.start + VERIFY_BATCH < count ? batch(current.start + VERIFY_BATCH) : null
    let checks
    try {
      checks = await current.pending.finish()
    } catch (error) {
      next?.pending.cancel()
      throw error
    }

    checks.forEach((check, k) => {
      const i = at(current.start + k)
      const file = files[i]
      // The key kept must be the one of the file that was read: a file the stat saw can have
      // been put aside meanwhile (a directory above it renamed keeps its ctime), and put back later.
      if (keys !== null && check.key !== keys[i]) keys[i] = ''
      judge(file, check.uid, check.mode)
      if (check.error === 'ENOENT') result.missing.push(file.path)
      else if (check.error || check.size !== file.size || check.executable !== file.executable || check.sha256 !== file.sha256) result.modified.push(file.path)
    })
    if (!next) break
    current = next
  }

  for (const path of found) result.extra.push(path)
  // Empty directories are listed with a trailing slash; records made before they were
  // kept list none, and an installed tag is read-only, so none can appear by accident.
  const recordedDirs = new Set(recorded.dirs ?? [])
  for (const dir of recordedDirs) if (!emptyDirs.has(dir)) result.missing.push(`${dir}/`)
  for (const dir of emptyDirs) if (!recordedDirs.has(dir)) result.extra.push(`${dir}/`)
  for (const list of [result.modified, result.missing, result.extra]) list.sort(compareBytes)
  result.untrusted = (untrusted && treeTrustProblem(root, `release ${release}`, untrusted, euid)?.message) ?? null
  result.ok = result.modified.length === 0 && result.missing.length === 0 && result.extra.length === 0
  // Keys are kept only for a release verified whole, and written only when they changed.
  if (keys !== null && result.ok && (cached === null || keys.some((key, i) => key !== cached.keys[i]))) await writeVerifiedCache(moduleDir, release, fingerprint, keys)
  return result
}

/** One line naming the first problem, for errors that refuse a run. */
export function describeMismatch(result: VerifyResult): string {
  const [kind, path] = result.modified.length > 0 ? ['modified', result.modified[0]] : result.missing.length > 0 ? ['missing', result.missing[0]] : ['added', result.extra[0]]
  const count = result.modified.length + result.missing.length + result.extra.length
  return `${result.release}/${path}: ${kind} since install${count > 1 ? ` (and ${count - 1} more)` : ''}`
}

/**
 * Everything but directories under a root (links and other things too), and the empty
 * directories, from directory entries; each directory is stat'ed for its owner and mode
 * (the files' come from checking them).
 */
function walk(dir: string, prefix: string, into: Set<string>, dirs: Set<string>, untrusted: UntrustedEntry[] | undefined, euid: number): void {
  const entries = readdirSync(dir, {withFileTypes: true})
  if (entries.length === 0 && prefix !== '') dirs.add(prefix)
  for (const entry of entries) {
    const path = prefix === '' ? entry.name : `${prefix}/${entry.name}`
    if (entry.isDirectory()) {
      const info = untrusted && lstatSync(`${dir}/${entry.name}`, {throwIfNoEntry: false})
      if (info && !isTrustedEntry(info.uid, info.mode, euid)) untrusted!.push({path: `${dir}/${entry.name}`, uid: info.uid, mode: info.mode})
      walk(`${dir}/${entry.name}`, path, into, dirs, untrusted, euid)
    } else into.add(path)
  }
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
): Promise<Array<{release: string; verified: boolean}>> {
  const checked: Array<{release: string; verified: boolean}> = []
  try {
    for (const release of releases) {
      if (release.kind !== 'tag') continue
      // Who owns and can write each entry: judged with the whole modulepath before (run-plan).
      const result = await verifyRelease(moduleDir, release.release, undefined, {judgeTrust: false, cache: true, tree: trees?.get(release.release)})
      if (!result.recorded) continue
      if (!result.ok) throw new VerificationError(describeMismatch(result), [`localpuppet verify ${release.release} lists every difference`])
      checked.push({release: release.release, verified: true})
    }
  } finally {
    // apply goes on for as long as Puppet runs: the hashing thread's memory is not kept meanwhile.
    stopCheckThread()
  }

  return checked
}
