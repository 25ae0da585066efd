import {createHash} from 'node:crypto'
import {closeSync, constants, fstatSync, lstatSync, mkdirSync, openSync, readFileSync, readSync, readdirSync} from 'node:fs'
import {join} from 'node:path'

import {localpuppetDir} from '../install/install-record.js'
import {type FileStat, type TreeFile, fileStat} from '../tree/release-tree.js'
import {isTrustedEntry} from '../util/trusted-path.js'
import {writeFileAtomic} from '../util/atomic-write.js'

/*
 * What the check before a run has already read, in the spirit of git's index: for each
 * recorded file of a tag, the stat key it had when it was last read and matched its record
 * (device, inode, size, mode, owner, mtime and ctime). A file whose key is unchanged is not
 * read again. Any write to a file, a chmod or a chown sets its ctime to the current time,
 * which no call made by a process can set back (only moving the system clock can), and a
 * file put in its place is another inode with a new ctime: so an unchanged key means
 * unchanged bytes, short of writing to the disk under the file system.
 *
 * A file changed within the moment before it was keyed could keep the same ctime through a
 * second change (a time stamp is a clock tick, not an event): git calls these racy. Only
 * keys whose times are older than RACY_MS before the check began are kept; a younger file
 * is read every time until it is older.
 *
 * A write through a shared writable mapping sets the times only when it faults a page
 * writable: until the page is written back (about 30 s on ext4, never on tmpfs) further
 * writes through it change the bytes and no time. So no key is kept for a file that some
 * process has mapped so at the moment the keys are written; one mapped later faults on
 * its first write and moves the ctime.
 *
 * Kept in `.localpuppet/verified/<release>.json` (the release's slashes escaped), mode
 * 0600 in a 0700 directory, root's. A cache that another user owns or could write, or that
 * is not what it says (another release, another record, another file count), is ignored:
 * everything is read, as without one.
 */

const RACY_MS = 2000
const FORMAT = 2
const MAX_CACHE_BYTES = 64 * 1024 * 1024

export interface VerifiedCache {
  /** Per recorded file (in the record's order): its key when last verified, or '' for none. */
  keys: string[]
}

/** `.localpuppet/verified`: root's own, like the records. */
export function verifiedCacheDir(moduleDir: string): string {
  return join(localpuppetDir(moduleDir), 'verified')
}

function cachePath(moduleDir: string, release: string): string {
  return join(verifiedCacheDir(moduleDir), `${encodeURIComponent(release)}.json`)
}

/** lstat of a file (never through a link: a link is not a verified file), or undefined when it is gone. */
export function statFile(path: string): FileStat | undefined {
  try {
    const info = lstatSync(path, {throwIfNoEntry: false})
    return info && fileStat(info)
  } catch {
    return undefined
  }
}

/** Whether a key may be kept: its times are older than RACY_MS before `since` (ms since the epoch). */
export function settledKey(stat: FileStat | undefined, since: number): boolean {
  // A file another user owns or can write (let through by --allow-untrusted) could change
  // the moment after: it is read every time, never keyed.
  return stat !== undefined && stat.key !== '' && stat.changedMs < since - RACY_MS && isTrustedEntry(stat.uid, stat.mode)
}

/**
 * What the keys were checked against: each recorded file's sha256, size, executable bit and
 * path, in the record's order (the keys are in that order). Not the record's `digest`
 * field: nothing checks that it is the digest of the files the record lists (a record
 * edited by hand keeps it), and it is the same for the files in any order.
 */
export function recordFingerprint(files: readonly TreeFile[]): string {
  return `sha256:${createHash('sha256')
    .update(files.map((file) => `${file.sha256} ${file.size} ${file.executable ? 'x' : '-'} ${file.path}\n`).join(''))
    .digest('hex')}`
}

/**
 * The cache of a release, or null when there is none or it cannot be believed: it must be a
 * regular file root (or the effective user) owns and nobody else can write, in a directory
 * the same holds of, and be for this release and record (recordFingerprint) and number of files.
 */
export function readVerifiedCache(moduleDir: string, release: string, record: string, files: number): VerifiedCache | null {
  const dir = verifiedCacheDir(moduleDir)
  const dirInfo = lstatSync(dir, {throwIfNoEntry: false})
  if (!dirInfo || !dirInfo.isDirectory() || !isTrustedEntry(dirInfo.uid, dirInfo.mode)) return null
  let fd: number
  try {
    fd = openSync(cachePath(moduleDir, release), constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK)
  } catch {
    return null
  }

  try {
    const info = fstatSync(fd)
    if (!info.isFile() || !isTrustedEntry(info.uid, info.mode) || info.size > MAX_CACHE_BYTES) return null
    const buffer = Buffer.allocUnsafe(info.size)
    let got = 0
    for (let read = -1; got < info.size && read !== 0; got += read) read = readSync(fd, buffer, got, info.size - got, null)
    const parsed = JSON.parse(buffer.toString('utf8', 0, got)) as {format?: unknown; release?: unknown; record?: unknown; keys?: unknown}
    if (parsed.format !== FORMAT || parsed.release !== release || parsed.record !== record || !Array.isArray(parsed.keys) || parsed.keys.length !== files) return null
    if (!parsed.keys.every((key) => typeof key === 'string')) return null
    return {keys: parsed.keys as string[]}
  } catch {
    return null
  } finally {
    closeSync(fd)
  }
}

/**
 * The inode numbers (as text) of files some process has mapped shared and writable, from
 * /proc/<pid>/maps; null when /proc cannot be read. Inode numbers only: a mapping's device
 * is not always the one stat gives (btrfs subvolumes, overlayfs), and a false match only
 * means a file read again. A process whose maps cannot be read (one that is not dumpable,
 * without CAP_SYS_PTRACE) is not seen.
 */
export function sharedWritableInodes(proc = '/proc'): Set<string> | null {
  let pids: string[]
  try {
    pids = readdirSync(proc).filter((name) => /^\d+$/.test(name))
  } catch {
    return null
  }

  if (pids.length === 0) return null
  const inodes = new Set<string>()
  for (const pid of pids) {
    let maps: string
    try {
      maps = readFileSync(`${proc}/${pid}/maps`, 'latin1')
    } catch {
      continue
    }

    // `start-end perms offset dev inode path`: perms `rw-s` (w second, s fourth).
    for (const line of maps.split('\n')) {
      const perms = line.indexOf(' ') + 1
      if (perms === 0 || line[perms + 1] !== 'w' || line[perms + 3] !== 's') continue
      const inode = line.slice(perms).split(/ +/)[3]
      if (inode !== undefined && inode !== '0') inodes.add(inode)
    }
  }

  return inodes
}

/**
 * Keeps the keys of a release that has just been verified whole. Best effort: a module
 * directory that cannot be written (a read-only mount, a CI job that is not root), or a
 * cache directory that is not trusted, keeps no cache, and the next check reads every file.
 */
export async function writeVerifiedCache(moduleDir: string, release: string, record: string, keys: string[]): Promise<void> {
  const dir = verifiedCacheDir(moduleDir)
  try {
    mkdirSync(dir, {mode: 0o700})
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') return
  }

  const dirInfo = lstatSync(dir, {throwIfNoEntry: false})
  if (!dirInfo || !dirInfo.isDirectory() || !isTrustedEntry(dirInfo.uid, dirInfo.mode)) return
  // Read now, after the files were: a file mapped writable since faults and moves its ctime.
  const mapped = sharedWritableInodes()
  if (mapped === null) return
  const kept = keys.map((key) => (key !== '' && mapped.has(key.split(':')[1]) ? '' : key))
  try {
    await writeFileAtomic(cachePath(moduleDir, release), JSON.stringify({format: FORMAT, release, record, keys: kept}) + '\n', 0o600)
  } catch {
    // Only a cache: the run goes on, and the next check reads every file.
  }
}
