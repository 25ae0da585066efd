import {lstatSync, readlinkSync, realpathSync, type Stats} from 'node:fs'
import {basename, dirname, isAbsolute, relative, resolve, sep} from 'node:path'

import {UntrustedPathError} from '../errors.js'
import {displayPath} from './shell-quote.js'

/**
 * localpuppet runs as root and executes, deletes and overwrites what the directories it
 * uses hold. Like sshd's StrictModes, sudo and cron, it trusts a directory (or file) only
 * when it, and every directory leading to it, is owned by root or by the effective user
 * and is writable by nobody else. A root-owned sticky directory such as /tmp is an
 * acceptable ancestor: others may create entries in it, but not move or replace ours.
 */
export interface TrustProblem {
  /** The path at fault (the target or one of its ancestors). */
  path: string
  uid: number
  mode: number
  /** One line: the path, its owner and mode, and the fix. */
  message: string
}

export interface TrustOptions {
  /** What the path is, for the message: `state directory`, `module directory`. */
  what: string
  /** Check the directories leading to the path too (default true). */
  ancestors?: boolean
  /** Stop checking ancestors at this directory (already checked by the caller). */
  below?: string
  /** Whether --allow-untrusted can override a refusal (not for keys and configuration): suggested in the message. */
  overridable?: boolean
  /** The path is a release root: the fix offered for it covers what it holds (chown -R, chmod -R), which is judged next. */
  tree?: boolean
  /** The path is code or data others may already have changed: the refusal says to review it after the fix. */
  content?: boolean
  /** The effective uid (tests). */
  euid?: number
}

const euidNow = (): number => process.geteuid?.() ?? 0

/** The override a refusal offers; each command says what it means there (BaseCommand.allowUntrustedHint). */
export const ALLOW_HINT = 'or pass --allow-untrusted to use it anyway (with a warning)'

/** For a release tree others could write: the permissions are the fix, but what it holds may already have been changed. */
export const UNTRUSTED_TREE_HINTS = ['others may already have changed what it holds: after the fix, reinstall the tag (or review the checkout)', ALLOW_HINT] as const

/**
 * The first reason `path` cannot be trusted, or null. The path is walked as the kernel
 * walks it, a component at a time: every directory it passes through is judged, every
 * symbolic link it follows must belong to root or the effective user (whoever owns a link
 * in a shared sticky directory can point it elsewhere later), and `..` goes up from where a
 * link led, not from the link's name. So once a path passes, nobody else can change where
 * it leads. A path that does not exist yet is judged by the nearest existing directory on
 * the way (that is where it will be created).
 */
export function findTrustProblem(path: string, options: TrustOptions): TrustProblem | null {
  const euid = options.euid ?? euidNow()
  const written = resolve(path)
  // Not resolve(): that folds `link/..` by name, where the kernel follows the link first.
  const raw = isAbsolute(path) ? path : `${process.cwd()}/${path}`
  const {steps, exists} = options.ancestors === false ? walkFrom(physicalDir(dirname(written)), [basename(written)]) : walkFrom('/', raw.split('/'))
  const below = options.below === undefined ? undefined : physicalDir(isAbsolute(options.below) ? options.below : `${process.cwd()}/${options.below}`)
  const last = steps.at(-1)
  for (const step of steps) {
    // The caller judged what leads to `below` (`below` itself is judged again, strictly: one line each, by `seen`).
    if (below !== undefined && step.path !== below && isInside(below, step.path) && step !== last) continue
    const isTarget = step === last
    if (step.info.isSymbolicLink()) {
      // The kernel's protected_symlinks rule: a link can be replaced only by whoever can
      // write its directory (judged on its own), so only a link in a sticky directory
      // others can write must belong to root, the effective user or that directory's owner.
      const shared = step.parent !== null && (step.parent.mode & 0o1000) !== 0 && (step.parent.mode & 0o022) !== 0
      if (!shared || step.info.uid === 0 || step.info.uid === euid || step.info.uid === step.parent?.uid) continue
      return {
        path: step.path,
        uid: step.info.uid,
        mode: step.info.mode & 0o7777,
        message: `${options.what}'s link ${displayPath(step.path)} is not trusted: owned by uid ${step.info.uid}, not root or uid ${euid}, who can point it elsewhere; fix: chown -h ${euid === 0 ? 'root' : euid} ${displayPath(step.path)}`,
      }
    }

    // From the module directory down nothing is shared: a sticky <app>/tags would let
    // anyone add a tag (or a link to an older one) that root then runs.
    const strict = isTarget || (below !== undefined && isInside(step.path, below))
    const problem = judge(step.path, step.info, {strict, isTarget, recursive: options.tree === true && isTarget && exists}, euid, options.what)
    if (!problem) continue
    // Not there yet, to be made in a shared sticky directory such as /tmp: the fix is to make it first, not to close /tmp.
    if (isTarget && !exists && step.info.uid === 0 && (step.info.mode & 0o1000) !== 0) {
      return {...problem, message: `${options.what} ${displayPath(written)} does not exist, and would be made in ${displayPath(step.path)}, where others can make it first (owner uid 0, mode ${(step.info.mode & 0o7777).toString(8).padStart(4, '0')}); fix: mkdir -p ${displayPath(written)} first, or use a directory only root can write`}
    }

    // Something others placed (an input, an archive) in their own directory: giving root
    // their directory is no fix, and a chown does not vouch for what the file holds.
    if (options.content && !isTarget && step.info.uid !== 0 && step.info.uid !== euid) {
      return {...problem, message: problem.message.replace(/; fix: .*$/, `; fix: copy it into a directory only ${euid === 0 ? 'root' : `uid ${euid}`} can write, and review it`)}
    }

    return problem
  }

  return null
}

interface WalkStep {
  /** Physical: no link and no `..` in it. */
  path: string
  info: Stats
  /** The directory it is in (null for the start). */
  parent: Stats | null
}

/**
 * The directories and links the kernel passes through to resolve `components` from the
 * physical directory `start`, in order, each with its lstat; the last is what the path
 * names or, when something on the way is missing (or links loop), the directory the
 * walk had reached: where it would be made, judged in its place.
 */
function walkFrom(start: string, components: string[]): {steps: WalkStep[]; exists: boolean} {
  const steps: WalkStep[] = []
  const stat = (path: string): Stats | undefined => {
    try {
      return lstatSync(path, {throwIfNoEntry: false})
    } catch {
      return undefined
    }
  }

  let current = start
  let currentInfo = stat(start)
  if (!currentInfo) return {steps, exists: false}
  steps.push({path: start, info: currentInfo, parent: null})
  // Stopped short: the directory reached is the last step, judged as the target.
  const stop = () => {
    if (steps.at(-1)!.path !== current && currentInfo) steps.push({path: current, info: currentInfo, parent: null})
    return {steps, exists: false}
  }

  const queue = [...components]
  let links = 0
  while (queue.length > 0) {
    const name = queue.shift()!
    if (name === '' || name === '.') continue
    if (name === '..') {
      current = dirname(current)
      currentInfo = stat(current)
      continue
    }

    const next = current === '/' ? `/${name}` : `${current}/${name}`
    const info = stat(next)
    if (!info) return stop()
    steps.push({path: next, info, parent: currentInfo ?? null})
    if (info.isSymbolicLink()) {
      let target: string
      try {
        if (++links > 40) return stop()
        target = readlinkSync(next)
      } catch {
        return stop()
      }

      if (target.startsWith('/')) {
        current = '/'
        currentInfo = stat('/')
      }

      queue.unshift(...target.split('/'))
      continue
    }

    if (!info.isDirectory() && queue.some((rest) => rest !== '' && rest !== '.')) return stop()
    current = next
    currentInfo = info
  }

  return {steps, exists: true}
}

/** A directory's real path when it has one, else the path as given. */
function physicalDir(path: string): string {
  try {
    // The C library's: it follows a link before a `..` after it, as the kernel does.
    return realpathSync.native(path)
  } catch {
    return path
  }
}

/**
 * Throws UntrustedPathError (77) naming the path, owner, mode and fix, unless `allow`
 * (--allow-untrusted), in which case the problem is returned for the run record.
 */
export function assertTrustedPath(path: string, options: TrustOptions & {allow?: boolean}): TrustProblem | null {
  const problem = findTrustProblem(path, options)
  refuseUnlessAllowed(problem, options)
  return problem
}

/** Throws UntrustedPathError (77) for a problem, with the hints its options call for (and `hints`, before the override), unless `allow`. */
export function refuseUnlessAllowed(problem: TrustProblem | null, options: Pick<TrustOptions, 'content' | 'overridable'> & {allow?: boolean; hints?: string[]}): void {
  if (problem && !options.allow) {
    const review = options.content ? ['others may already have changed it: review it after the fix'] : []
    throw new UntrustedPathError(problem.message, [...review, ...(options.hints ?? []), ...(options.overridable === false ? [] : [ALLOW_HINT])])
  }
}

/** For an unsigned archive or repository whose place others could change. */
export const UNSIGNED_HINT = 'or sign it (pack --sign, publish --sign) and trust the key (--trust): a signature vouches for it wherever it lies'

/**
 * The fault of a file already open, judged from its fstat: what a path check cannot
 * promise once the file is opened (it may have been replaced in between). null when trusted.
 */
export function openedFileTrustProblem(path: string, info: Pick<Stats, 'uid' | 'mode' | 'isDirectory'>, what: string, euid = euidNow()): TrustProblem | null {
  return judge(path, info as Stats, {strict: true, isTarget: true, recursive: false}, euid, what)
}

/**
 * A file already open, judged by its path (every directory and link on the way, now) and
 * then by its own fstat: the file read is the file judged, whatever was swapped in
 * between. One problem at most, the first found.
 */
export function openedPathTrustProblem(path: string, info: Pick<Stats, 'uid' | 'mode' | 'isDirectory'>, options: TrustOptions): TrustProblem | null {
  return findTrustProblem(path, options) ?? openedFileTrustProblem(resolve(path), info, options.what, options.euid)
}

/**
 * Checks several paths; returns the problems allowed (empty when everything is trusted).
 * `seen`: directories already reported by an earlier call, to report each once.
 */
export function assertTrustedPaths(paths: Array<{path: string} & TrustOptions>, allow = false, seen = new Set<string>()): string[] {
  const allowed: string[] = []
  for (const entry of paths) {
    const problem = assertTrustedPath(entry.path, {...entry, allow})
    // One line per directory at fault, however many of the paths lie below it.
    if (problem && !seen.has(problem.path)) allowed.push(problem.message)
    if (problem) seen.add(problem.path)
  }

  return allowed
}

/** True when `path` is `dir` or inside it (both absolute, normalised). */
export function isInside(path: string, dir: string): boolean {
  const rel = relative(dir, path)
  return rel === '' || (!rel.startsWith('..') && !isAbsolute(rel) && rel.split(sep)[0] !== '..')
}

/**
 * `strict`: no sticky exception (the target itself, or anything from `below` down);
 * `isTarget`: named as the path rather than its parent; `recursive`: the fix covers a tree.
 */
function judge(dir: string, info: Stats, how: {strict: boolean; isTarget: boolean; recursive: boolean}, euid: number, what: string): TrustProblem | null {
  const {strict, isTarget, recursive} = how
  // A root-owned sticky directory (/tmp): others cannot move or replace what we put in it.
  const stickyAncestor = !strict && info.isDirectory() && (info.mode & 0o1000) !== 0 && info.uid === 0
  const fault = faultOf(info.uid, info.mode, euid)
  if (!fault || (fault.ownerOk && stickyAncestor)) return null
  const whose = isTarget ? what : `${what}'s parent directory`
  const r = recursive ? '-R ' : ''
  const fix = !fault.ownerOk ? `chown ${r}${euid === 0 ? 'root' : euid} ${displayPath(dir)}` : `chmod ${r}go-w ${displayPath(dir)}`
  return {path: dir, uid: info.uid, mode: info.mode & 0o7777, message: `${whose} ${displayPath(dir)} is not trusted: ${fault.reason}; fix: ${fix}`}
}

/** Why an owner and mode are not trusted (owned by another user, or writable by group or others), or null. */
function faultOf(uid: number, mode: number, euid: number): {ownerOk: boolean; reason: string} | null {
  const ownerOk = uid === 0 || uid === euid
  if (ownerOk && (mode & 0o022) === 0) return null
  const octal = (mode & 0o7777).toString(8).padStart(4, '0')
  const why = !ownerOk ? `owned by uid ${uid}, not root or uid ${euid}` : `writable by ${(mode & 0o020) !== 0 ? 'group' : ''}${(mode & 0o022) === 0o022 ? ' and ' : ''}${(mode & 0o002) !== 0 ? 'others' : ''}`
  return {ownerOk, reason: `${why} (owner uid ${uid}, mode ${octal})`}
}

/** Whether a file or directory inside a trusted tree may be trusted too: owned by root or the effective user, writable by nobody else. */
export function isTrustedEntry(uid: number, mode: number, euid = euidNow()): boolean {
  return faultOf(uid, mode, euid) === null
}

/** A file or directory inside a release tree that is not trusted (isTrustedEntry), by its absolute path. */
export interface UntrustedEntry {
  path: string
  uid: number
  mode: number
}

/**
 * The untrusted entries of one release tree as one problem: the first (in byte order),
 * how many more, and one fix for the whole tree. Puppet, run as root, reads and runs
 * every file of a release: one that another user could rewrite is as bad as a release
 * directory they could swap. null when there are none.
 */
export function treeTrustProblem(root: string, what: string, entries: UntrustedEntry[], euid = euidNow()): TrustProblem | null {
  if (entries.length === 0) return null
  const first = entries.reduce((a, b) => (a.path < b.path ? a : b))
  const fault = faultOf(first.uid, first.mode, euid)!
  const owners = entries.some((entry) => entry.uid !== 0 && entry.uid !== euid)
  const writable = entries.some((entry) => (entry.mode & 0o022) !== 0)
  const fix = [owners ? `chown -R ${euid === 0 ? 'root' : euid} ${displayPath(root)}` : '', writable ? `chmod -R go-w ${displayPath(root)}` : ''].filter(Boolean).join(' && ')
  const more = entries.length > 1 ? ` (and ${entries.length - 1} more)` : ''
  return {path: first.path, uid: first.uid, mode: first.mode & 0o7777, message: `${what} holds ${displayPath(first.path)}, which is not trusted: ${fault.reason}${more}; fix: ${fix}`}
}

/** Refuses the first problem with a release tree (77) unless allowed; returns the messages of those allowed, each path once. */
export function assertNoTrustProblems(problems: Array<Pick<TrustProblem, 'path' | 'message'> | null>, allow = false, seen = new Set<string>()): string[] {
  const allowed: string[] = []
  for (const problem of problems) {
    if (!problem) continue
    if (!allow) throw new UntrustedPathError(problem.message, [...UNTRUSTED_TREE_HINTS])
    if (!seen.has(problem.path)) allowed.push(problem.message)
    seen.add(problem.path)
  }

  return allowed
}

type TrustEntry = {path: string} & TrustOptions
type ReleaseTreeProblem = Pick<TrustProblem, 'path' | 'message'> | null

/**
 * The paths a run believes, filled as they become known and judged where what follows
 * would believe them: check() refuses (77) the first problem unless allowed, in the order
 * added, and returns every problem allowed so far. A path is judged once, and each
 * directory at fault is reported once.
 */
export class TrustList {
  private readonly seen = new Set<string>()
  private readonly judged = new Set<string>()
  private pending: Array<{paths: TrustEntry[]} | {problems: ReleaseTreeProblem[]}> = []
  private readonly allowed: string[]

  /** `before`: problems allowed earlier (by a fetch), listed first. */
  constructor(
    private readonly allow: boolean,
    before: readonly string[] = [],
  ) {
    this.allowed = [...before]
  }

  add(...paths: TrustEntry[]): this {
    this.pending.push({paths})
    return this
  }

  /** Problems already found inside release trees (resolve's untrustedTrees). */
  addProblems(problems: ReleaseTreeProblem[]): this {
    this.pending.push({problems})
    return this
  }

  check(): string[] {
    const pending = this.pending
    this.pending = []
    for (const batch of pending) {
      if ('problems' in batch) {
        this.allowed.push(...assertNoTrustProblems(batch.problems, this.allow, this.seen))
        continue
      }

      const fresh = batch.paths.filter((entry) => !this.judged.has(`${entry.what}\0${entry.path}`))
      for (const entry of fresh) this.judged.add(`${entry.what}\0${entry.path}`)
      this.allowed.push(...assertTrustedPaths(fresh, this.allow, this.seen))
    }

    return [...this.allowed]
  }
}
