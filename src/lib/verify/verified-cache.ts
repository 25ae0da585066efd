import {createHash, randomBytes} from 'node:crypto'
import {closeSync, constants, fstatSync, fsyncSync, ftruncateSync, lstatSync, mkdirSync, openSync, readFileSync, readdirSync, renameSync, rmSync, writeSync} from 'node:fs'
import {join} from 'node:path'

import {type InstallRecord, localpuppetDir, recordText} from '../install/install-record.js'
import {type FileStat, fileStat} from '../tree/release-tree.js'
import {JsonReader, fdSource} from '../util/json-stream.js'
import {isTrustedEntry} from '../util/trusted-path.js'

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
 * process has mapped so when the check begins or when the keys are written (KeyWriter);
 * one mapped and unmapped in between faults on its first write and moves the ctime.
 *
 * Kept in `.localpuppet/verified/<release>.json` (the release's slashes escaped), mode
 * 0600 in a 0700 directory, root's: format, release and record first, then one key per
 * recorded file, in the record's order, read and written as the files are checked. A
 * cache that another user owns or could write, or that is not what it says (another
 * release, another record), is ignored: everything is read, as without one.
 */

const RACY_MS = 2000
const FORMAT = 3
/** Key text gathered before it is written. */
const WRITE_CHARS = 64 * 1024

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
 * What the keys were checked against: the install record's bytes (RecordStream.fingerprint,
 * or recordText's for a record in memory), so the files it lists, in its order (the keys
 * are in that order). Not the record's `digest` field: nothing checks that it is the
 * digest of the files the record lists (a record edited by hand keeps it).
 */
export function recordFingerprint(record: InstallRecord): string {
  const hash = createHash('sha256')
  for (const piece of recordText(record)) hash.update(piece)
  return `sha256:${hash.digest('hex')}`
}

/** The cache directory, when it can be believed: root's (or the effective user's), nobody else's to write. */
function trustedCacheDir(moduleDir: string): string | null {
  const dir = verifiedCacheDir(moduleDir)
  const info = lstatSync(dir, {throwIfNoEntry: false})
  return info && info.isDirectory() && isTrustedEntry(info.uid, info.mode) ? dir : null
}

/**
 * The keys kept at a release's last check, read in the record's order as its files come
 * (a batch at a time: memory does not grow with the release). Null when there are none
 * or they cannot be believed: the cache must be a regular file root (or the effective
 * user) owns and nobody else can write, in a directory the same holds of, and be for this
 * release and record (its fingerprint). A key it lacks, or one that does not parse, is
 * simply none: that file is read.
 */
export class CachedKeys {
  private batch: unknown[] = []
  private at = 0
  private ended = false

  private constructor(
    private readonly fd: number,
    private readonly reader: JsonReader,
  ) {}

  static open(moduleDir: string, release: string, record: string): CachedKeys | null {
    if (!trustedCacheDir(moduleDir)) return null
    let fd: number
    try {
      fd = openSync(cachePath(moduleDir, release), constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK)
    } catch {
      return null
    }

    try {
      const info = fstatSync(fd)
      if (!info.isFile() || !isTrustedEntry(info.uid, info.mode)) throw new Error('not trusted')
      // format, release and record come first (KeyWriter writes them so), then keys.
      const reader = new JsonReader(fdSource(fd))
      reader.enterObject()
      const head: Record<string, unknown> = {}
      for (let key; (key = reader.key()) !== 'keys'; ) {
        if (key === null) throw new Error('no keys')
        head[key] = reader.value()
      }

      if (head.format !== FORMAT || head.release !== release || head.record !== record) throw new Error('another cache')
      reader.enterArray()
      return new CachedKeys(fd, reader)
    } catch {
      closeSync(fd)
      return null
    }
  }

  /** The next file's key, or '' for none. */
  next(): string {
    if (this.at === this.batch.length) {
      if (this.ended) return ''
      try {
        this.batch = this.reader.elements()
      } catch {
        this.batch = []
      }

      this.at = 0
      if (this.batch.length === 0) {
        this.ended = true
        return ''
      }
    }

    const key = this.batch[this.at++]
    return typeof key === 'string' ? key : ''
  }

  close(): void {
    closeSync(this.fd)
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

/** The inode in a stat key (`dev:ino:...`). */
const keyInode = (key: string) => key.split(':')[1]

/**
 * The keys of a check, written as its files are checked (to a temporary file beside the
 * cache: memory does not grow with the release) and kept only for a release verified
 * whole, by commit(). No key is written for a file some process had mapped shared and
 * writable when the check began (`mapped`), and commit() drops those mapped when it ends:
 * a write through a page already faulted writable sets no ctime until writeback, so a
 * process that wrote after the file was read and unmapped before the keys were kept would
 * leave a key with no trace of the change; one mapped and unmapped wholly in between
 * faulted on its first write and moved the ctime.
 *
 * Best effort: a module directory that cannot be written (a read-only mount, a CI job that
 * is not root), a cache directory that is not trusted, or a /proc that cannot be read keeps
 * no keys (open() returns null), and the next check reads every file.
 */
export class KeyWriter {
  private text: string
  private first = true
  private position = 0

  private constructor(
    private readonly path: string,
    private readonly temp: string,
    private readonly fd: number,
    private readonly release: string,
    private readonly record: string,
    private readonly mapped: Set<string>,
  ) {
    this.text = KeyWriter.head(release, record)
  }

  static open(moduleDir: string, release: string, record: string): KeyWriter | null {
    // Read before any file is: a mapping that goes away before the check ends is still seen.
    const mapped = sharedWritableInodes()
    if (mapped === null) return null
    try {
      mkdirSync(verifiedCacheDir(moduleDir), {mode: 0o700})
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') return null
    }

    if (!trustedCacheDir(moduleDir)) return null
    const path = cachePath(moduleDir, release)
    const temp = `${path}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`
    try {
      return new KeyWriter(path, temp, openSync(temp, 'wx+', 0o600), release, record, mapped)
    } catch {
      return null
    }
  }

  private static head(release: string, record: string): string {
    return `{"format":${FORMAT},"release":${JSON.stringify(release)},"record":${JSON.stringify(record)},"keys":[`
  }

  /** The next file's key ('' for none). */
  add(key: string): void {
    const kept = key !== '' && this.mapped.has(keyInode(key)) ? '' : key
    this.text += `${this.first ? '' : ','}${JSON.stringify(kept)}`
    this.first = false
    if (this.text.length >= WRITE_CHARS) this.flush()
  }

  /** Keeps the keys (renamed over the cache); best effort, as open(). */
  commit(): void {
    try {
      this.text += ']}\n'
      this.flush()
      // Read again now the files were: a file mapped meanwhile and still mapped is not keyed either.
      const mapped = sharedWritableInodes()
      if (mapped === null) throw new Error('/proc cannot be read')
      const added = [...mapped].filter((inode) => !this.mapped.has(inode))
      if (added.length > 0) this.drop(new Set(added))
      fsyncSync(this.fd)
      renameSync(this.temp, this.path)
    } catch {
      this.abort()
      return
    }

    closeSync(this.fd)
  }

  /** Keeps nothing. */
  abort(): void {
    try {
      closeSync(this.fd)
    } catch {
      // Already closed: the temporary file is removed all the same.
    }

    rmSync(this.temp, {force: true})
  }

  /** Rewrites the keys written so far without those of these inodes. */
  private drop(inodes: Set<string>): void {
    const reader = new JsonReader(fdSource(this.fd))
    reader.enterObject()
    if (!reader.seek('keys')) throw new Error('no keys')
    reader.enterArray()
    // Rewritten in place: each key is written no longer than it was read, behind the reading.
    let text = KeyWriter.head(this.release, this.record)
    let position = 0
    let first = true
    const write = (last: boolean) => {
      if (!last && text.length < WRITE_CHARS) return
      position += writeText(this.fd, text, position)
      text = ''
    }

    for (let keys; (keys = reader.elements()).length > 0; ) {
      for (const key of keys as string[]) {
        text += `${first ? '' : ','}${JSON.stringify(key !== '' && inodes.has(keyInode(key)) ? '' : key)}`
        first = false
      }

      write(false)
    }

    text += ']}\n'
    write(true)
    ftruncateSync(this.fd, position)
  }

  private flush(): void {
    this.position += writeText(this.fd, this.text, this.position)
    this.text = ''
  }
}

/** Writes text at a position; returns the bytes written. */
function writeText(fd: number, text: string, position: number): number {
  const bytes = Buffer.from(text)
  for (let offset = 0; offset < bytes.length; ) offset += writeSync(fd, bytes, offset, bytes.length - offset, position + offset)
  return bytes.length
}
