import {type Hash, createHash, randomBytes} from 'node:crypto'
import {type Stats, chmodSync, closeSync, fchmodSync, fdatasyncSync, linkSync, lstatSync, mkdirSync, openSync, writeSync} from 'node:fs'
import {chmod, lstat, mkdir, readdir, realpath, rename, rm, rmdir} from 'node:fs/promises'
import {dirname, join} from 'node:path'

import {ConflictError, LocalpuppetError, ReleaseError, describeFsError} from '../errors.js'
import {startChild} from '../util/child.js'
import {assertReleasesNotInUse} from './in-use.js'
import {RunLock} from '../state/lock.js'
import {faultPoint} from '../util/fault.js'
import {asIoError} from '../util/io-error.js'
import {assertTrustedPaths} from '../util/trusted-path.js'
import {type InstallSource, type RecordToWrite, assertTrustedModuleDir, localpuppetDir, readRecordHead, recordPath, writeInstallRecord} from './install-record.js'
import {type TreeFile, readReleaseContent, treeDigest} from '../tree/release-tree.js'
import {oneShotHash} from '../tree/hash-files.js'

/** The largest file gathered in memory before it is written. */
const SMALL_FILE_BYTES = 1024 * 1024

/** Writes a whole buffer at the file's offset (writeSync may write less than asked). */
function writeAll(fd: number, data: Buffer): void {
  for (let offset = 0; offset < data.length; ) offset += writeSync(fd, data, offset, data.length - offset)
}

/** A release fully written and checked in staging, ready to be renamed into place. */
export interface StagedRelease {
  release: string
  digest: string
  /** In byte order of the path; read as they are needed (an archive's come from release.json's spool). */
  files: Iterable<TreeFile>
  /** Empty directories, made in staging before the release moves into place. */
  dirs?: string[]
  /** Trunk or branch: replaced on install, never recorded or made read-only. */
  mutable: boolean
}

export interface CommitResult {
  installed: string[]
  unchanged: string[]
  replaced: string[]
}

/** A file being written into staging: hashed as it is written. */
export interface StagedFile {
  write(chunk: Buffer): void
  /** Closes the file, makes it read-only, and returns what was written; `sync`: its data made durable first (fdatasync). */
  finish(sync?: boolean): {sha256: string; size: number}
}

/**
 * Where an install is put together before anything becomes visible: a directory under
 * `<module-dir>/.localpuppet/staging/`, on the module directory's filesystem so that each
 * release can be renamed into place atomically. One install at a time per module
 * directory (its install lock); staging left by a killed install is removed by the next.
 */
export class Staging {
  private constructor(
    readonly moduleDir: string,
    readonly dir: string,
    private readonly lock: RunLock,
    private readonly createdLocalpuppetDir: boolean,
    private readonly allowUntrusted: boolean,
    /** The trust problems --allow-untrusted let through. */
    readonly untrusted: string[],
    /** The directories they are about, each reported once. */
    private readonly untrustedPaths: Set<string>,
  ) {}

  /**
   * The directory made last and those above it, up to staging: one mkdir per directory, not
   * one per file. Entries come in byte order of the path, so a directory left is not seen
   * again, and nothing more is kept (a set of every directory made grew with the release).
   */
  private made: string[] = []
  /** Where a small file is gathered before it is written: one per install (its files come one at a time), not per process (installs may run side by side in one). */
  private smallFile: Buffer | null = null
  /** Files being written: closed by close() when an install stops half way (a full disk frees nothing while they are open). */
  private readonly open = new Set<number>()

  /** Refuses (77) a module directory others could write, unless `allowUntrusted` (--allow-untrusted). */
  static async open(written: string, options: {allowUntrusted?: boolean} = {}): Promise<Staging> {
    const allow = Boolean(options.allowUntrusted)
    const seen = new Set<string>()
    const untrusted = assertTrustedModuleDir(written, allow, seen)
    // Judged as written, links on the way included; from here on the physical directory,
    // so that `link/..` in it means what the kernel makes of it, not a folding by name.
    const moduleDir = await realpath(written).catch(() => written)
    const own = localpuppetDir(moduleDir)
    let created = false
    try {
      await lstat(own)
    } catch {
      await mkdir(own, {mode: 0o755}).catch((error: unknown) => {
        throw describeFsError(error, `module directory ${moduleDir}`)
      })
      created = true
    }

    const lock = await RunLock.acquireFile(join(own, 'install.lock'), null)
    try {
      await recoverReplaced(moduleDir)
      const root = join(own, 'staging')
      // Whatever is here was left by an install that was killed: we hold the lock now.
      await rm(root, {recursive: true, force: true})
      const dir = join(root, `${process.pid}-${randomBytes(4).toString('hex')}`)
      await mkdir(dir, {recursive: true, mode: 0o700})
      return new Staging(moduleDir, dir, lock, created, allow, untrusted, seen)
    } catch (error) {
      // A full disk here must not leave the lock or an empty staging directory behind.
      await rm(join(own, 'staging'), {recursive: true, force: true}).catch(() => {})
      await lock.release()
      if (created) await rmdir(own).catch(() => {})
      throw error
    }
  }

  /** Whose files may be linked, asked once (not once per file: 7 ms of a 3,864-file install). */
  private readonly euid = process.geteuid?.()
  /** The process umask, read once (creating a file with a mode loses the bits it masks). */
  private readonly umask = readUmask()

  /**
   * Creates a file at an archive path (already checked safe) inside staging; refuses
   * duplicates. `readOnly` for tags (0444/0555); a trunk or branch keeps ordinary modes
   * (0644/0755). `expectedSize`: what the archive says it holds (one file at a time is
   * gathered in memory when it is small).
   */
  createFile(archivePath: string, executable: boolean, readOnly = true, expectedSize?: number): StagedFile {
    const path = join(this.dir, archivePath)
    const mode = (executable ? 0o555 : 0o444) | (readOnly ? 0 : 0o200)
    // Created with its final mode when the umask keeps it (the file is written through
    // this descriptor all the same); otherwise set once it is written.
    const createdWithMode = (mode & this.umask) === 0
    let fd: number
    try {
      const parent = dirname(path)
      if (this.made.at(-1) !== parent) this.makeDirs(parent)

      fd = openSync(path, 'wx', createdWithMode ? mode : 0o600)
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code
      if (code === 'EEXIST') throw new ReleaseError(`${archivePath}: appears twice in the archive`)
      if (code === 'ENOTDIR' || code === 'EISDIR') throw new ReleaseError(`${archivePath}: conflicts with another entry (a file and a directory of the same name)`)
      if (code === 'ENAMETOOLONG') throw new ReleaseError(`${archivePath}: a name too long for the file system of ${this.moduleDir}`)
      throw error
    }

    this.open.add(fd)
    const open = this.open
    const small = (this.smallFile ??= Buffer.allocUnsafe(SMALL_FILE_BYTES))
    // A file of known size that fits in the shared buffer (nearly all of a release's) is
    // gathered there, written with one call and hashed with crypto.hash: no Hash object
    // per file (each holds native memory until a full GC, which a long extraction may
    // never run: 100,000 of them grew install's memory by ~60 MB), one write per file.
    // Any other is written and hashed as it comes.
    let hash: Hash | null = expectedSize !== undefined && expectedSize <= small.length && oneShotHash ? null : createHash('sha256')
    let size = 0
    return {
      write(chunk) {
        if (!hash && size + chunk.length > small.length) {
          // More than it said: written as it comes from here on.
          hash = createHash('sha256').update(small.subarray(0, size))
          writeAll(fd, small.subarray(0, size))
        }

        if (hash) {
          hash.update(chunk)
          writeAll(fd, chunk)
        } else chunk.copy(small, size)
        size += chunk.length
      },
      finish(sync = false) {
        open.delete(fd)
        let sha256: string
        try {
          if (hash) sha256 = hash.digest('hex')
          else {
            writeAll(fd, small.subarray(0, size))
            sha256 = oneShotHash!('sha256', small.subarray(0, size))
          }

          if (!createdWithMode) fchmodSync(fd, mode)
          if (sync) fdatasyncSync(fd)
        } finally {
          closeSync(fd)
        }

        return {sha256, size}
      },
    }
  }

  /**
   * Puts an installed tag's file at an archive path in staging as a hard link: the same
   * inode, nothing written (delta/install-delta.ts). Only a regular file of this user's
   * (read-only, as a tag's files are: 0444, or 0555 when executable) is linked; false when
   * it cannot be (another owner or mode, another filesystem, too many links): the caller
   * writes the file instead. What the link holds is the caller's to check.
   */
  linkFile(archivePath: string, from: string, executable: boolean, seen?: Stats): boolean {
    // (`seen`: the caller's lstat of `from` a moment ago, not asked again.)
    const info = seen ?? lstatSync(from, {throwIfNoEntry: false})
    const mode = executable ? 0o555 : 0o444
    // Only the owner's write bit may differ (a tag made writable to remove it, `chmod -R u+w`,
    // writes through to the inodes it shares): the file is made read-only again, for every tag that has it.
    if (!info?.isFile() || info.uid !== this.euid || ((info.mode & 0o7777) | 0o200) !== (mode | 0o200)) return false
    if ((info.mode & 0o200) !== 0) chmodSync(from, mode)
    const path = join(this.dir, archivePath)
    const parent = dirname(path)
    if (this.made.at(-1) !== parent) this.makeDirs(parent)
    try {
      linkSync(from, path)
      return true
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code
      if (code === 'EXDEV' || code === 'EMLINK' || code === 'EPERM' || code === 'ENOENT') return false
      if (code === 'EEXIST') throw new ReleaseError(`${archivePath}: listed twice`)
      throw error
    }
  }

  /**
   * Makes a directory in staging and the ones missing above it, top down: one mkdir per
   * directory, each once (recursive mkdir tried the deepest first and failed on each
   * missing level, and knew nothing of the directories it had made: 2,621 calls for 5,989
   * files, 648 of them on directories that existed). A file in the way (an archive with a
   * file and a directory of the same name) is a conflict.
   */
  private makeDirs(dir: string): void {
    // What of the chain made last lies above `dir` is made already.
    // (`dir` itself may be one of them: a file of `a` after those of `a/b` keeps `a`.)
    while (this.made.length > 0 && dir !== this.made.at(-1) && !dir.startsWith(`${this.made.at(-1)!}/`)) this.made.pop()
    const missing: string[] = []
    for (let at = dir; at.length > this.dir.length && at !== this.made.at(-1); at = dirname(at)) missing.push(at)
    for (const path of missing.reverse()) {
      try {
        mkdirSync(path, {mode: 0o755})
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
        // Made before (an archive in another order comes back to a directory), or a file in the way.
        if (!lstatSync(path).isDirectory()) throw Object.assign(new Error(`${path}: not a directory`), {code: 'ENOTDIR'})
      }

      this.made.push(path)
    }
  }

  /**
   * Moves staged releases into the module directory, in the order given (dependencies
   * first). Everything is checked before anything moves: a tag already installed with
   * other content is a ConflictError (73) and nothing is touched; the same content is
   * left as it is. Each release appears with one rename, so it is never visible half
   * written; its install record is written after it.
   */
  async commit(releases: StagedRelease[], source: InstallSource, signedBy: string | null, options: {dataSynced?: boolean} = {}): Promise<CommitResult> {
    // Where each release appears (`<app>/tags`, `<app>`): whoever can write there can swap
    // it, or what is already there. Checked before anything is read or moved.
    const places = [...new Set(releases.map((release) => dirname(release.release)))].map((place) => ({path: join(this.moduleDir, place), what: `${place} directory`, below: this.moduleDir}))
    this.untrusted.push(...assertTrustedPaths(places, this.allowUntrusted, this.untrustedPaths))

    const result: CommitResult = {installed: [], unchanged: [], replaced: []}
    const actions: Array<{release: StagedRelease; action: 'install' | 'replace' | 'unchanged'}> = []
    for (const release of releases) {
      const target = join(this.moduleDir, release.release)
      let exists = false
      try {
        const info = await lstat(target)
        if (!info.isDirectory()) throw new ConflictError(`${release.release}: exists and is not a directory`)
        exists = true
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error
      }

      if (!exists) actions.push({release, action: 'install'})
      else if (release.mutable) actions.push({release, action: 'replace'})
      else {
        const current = await installedDigest(target, release.release)
        if (current !== release.digest) {
          const record = readRecordHead(this.moduleDir, release.release)
          if (record?.digest === release.digest) {
            throw new ConflictError(`${release.release} was modified after it was installed; nothing was touched`, [
              `localpuppet verify ${release.release} lists the changes; remove ${target} and install again to restore it`,
            ])
          }

          throw new ConflictError(`${release.release} is already installed with other content (${current}; the archive has ${release.digest})`, [
            'tags are immutable: publish the change as a new tag',
          ])
        }

        actions.push({release, action: 'unchanged'})
      }
    }

    // Empty directories a release keeps (the others came with its files).
    for (const {release} of actions) {
      for (const dir of release.dirs ?? []) await mkdir(join(this.dir, release.release, dir), {recursive: true, mode: 0o755})
    }

    // A trunk or branch a live run is using is not replaced under it (73).
    await assertReleasesNotInUse(this.moduleDir, actions.filter((entry) => entry.action === 'replace').map((entry) => entry.release.release))
    // Data on disk before any rename makes it visible (one sync for the filesystem).
    // (Not when every file staged is durable already: written with finish(true), or a hard link to
    // an installed file. The links and directories are metadata, which a journaling file
    // system commits in order, before the rename that makes them visible.)
    if (!options.dataSynced) await syncFilesystem(this.dir)
    faultPoint('install:before-commit')
    for (const {release, action} of actions) {
      const staged = join(this.dir, release.release)
      const target = join(this.moduleDir, release.release)
      const dirs = release.dirs ?? []
      const record: RecordToWrite = {format: 1, release: release.release, digest: release.digest, files: release.files, ...(dirs.length > 0 ? {dirs} : {}), installedAt: new Date().toISOString(), source, signedBy}
      if (action === 'unchanged') {
        // Renamed into place by an install killed before it finished the job: recorded
        // (the record comes first) but maybe not yet read-only; or, from older versions,
        // not recorded.
        if (!release.mutable && ((await lstat(target)).mode & 0o222) !== 0) await makeDirsReadOnly(target)
        if (!readRecordHead(this.moduleDir, release.release)) await writeInstallRecord(this.moduleDir, record)

        result.unchanged.push(release.release)
        continue
      }

      await mkdir(dirname(target), {recursive: true, mode: 0o755})
      // A release without files has nothing staged yet: it is still a release.
      await mkdir(staged, {recursive: true, mode: 0o755})
      if (action === 'replace') {
        // The old trunk or branch waits under .localpuppet/replaced until the new one is in
        // place; an install killed in between is undone by the next one (recoverReplaced).
        const old = join(localpuppetDir(this.moduleDir), 'replaced', release.release)
        await rm(old, {recursive: true, force: true})
        await mkdir(dirname(old), {recursive: true, mode: 0o700})
        await rename(target, old)
        await rename(staged, target)
        await rm(old, {recursive: true, force: true})
        result.replaced.push(release.release)
      } else {
        // The record first: a tag is never visible without one (a full disk stops the
        // install here, with nothing visible). A record left without its tag by a crash is
        // rewritten by the next install of that tag; verify reports the tag as missing.
        if (!release.mutable) await writeInstallRecord(this.moduleDir, record)
        try {
          await renameIntoPlace(staged, target, release.release)
        } catch (error) {
          if (!release.mutable) await rm(recordPath(this.moduleDir, release.release), {force: true})
          throw error
        }

        faultPoint('install:after-rename')
        if (!release.mutable) makeReleaseDirsReadOnly(target, release)
        result.installed.push(release.release)
      }

    }

    return result
  }

  /** Removes staging and the lock (and .localpuppet itself if this install created it and left nothing). */
  async close(): Promise<void> {
    for (const fd of this.open) closeSync(fd)
    this.open.clear()
    await rm(this.dir, {recursive: true, force: true})
    await rmdir(dirname(this.dir)).catch(() => {})
    await this.lock.release()
    if (this.createdLocalpuppetDir) await rmdir(localpuppetDir(this.moduleDir)).catch(() => {})
  }
}

/**
 * A trunk or branch moved aside by an install killed before its replacement was in
 * place goes back; one whose replacement made it is removed.
 */
async function recoverReplaced(moduleDir: string): Promise<void> {
  const root = join(localpuppetDir(moduleDir), 'replaced')
  let apps: string[]
  try {
    apps = await readdir(root)
  } catch {
    return
  }

  for (const app of apps) {
    const releases = ['trunk', ...(await readdir(join(root, app, 'branches')).catch(() => [] as string[])).map((b) => `branches/${b}`)]
    for (const kind of releases) {
      const aside = join(root, app, kind)
      try {
        await lstat(aside)
      } catch {
        continue
      }

      const target = join(moduleDir, app, kind)
      const present = await lstat(target).then(() => true, () => false)
      if (present) await rm(aside, {recursive: true, force: true})
      else {
        await mkdir(dirname(target), {recursive: true, mode: 0o755})
        await rename(aside, target)
      }
    }
  }

  await rm(root, {recursive: true, force: true})
}

async function renameIntoPlace(staged: string, target: string, release: string): Promise<void> {
  try {
    await rename(staged, target)
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === 'EEXIST' || code === 'ENOTEMPTY') throw new ConflictError(`${release} appeared while installing; nothing of it was replaced`)
    throw error
  }
}

async function installedDigest(target: string, release: string): Promise<string> {
  try {
    const {files, dirs} = await readReleaseContent(target, release)
    return treeDigest(files, dirs)
  } catch (error) {
    if (error instanceof ReleaseError) return `unreadable (${error.message})`
    throw error
  }
}

/**
 * The directories of a release just installed, read-only, deepest first: the ones its
 * files and empty directories imply, known without reading the tree again. The files come
 * in byte order of the path: a directory is done once a file outside it comes, and only
 * the directories above the current file are kept.
 */
function makeReleaseDirsReadOnly(root: string, release: StagedRelease): void {
  const open: string[] = []
  const close = (keep: (dir: string) => boolean) => {
    while (open.length > 0 && !keep(open.at(-1)!)) chmodSync(`${root}/${open.pop()!}`, 0o555)
  }

  const enter = (path: string, self: boolean) => {
    close((dir) => path.startsWith(`${dir}/`))
    const end = self ? path.length : path.lastIndexOf('/')
    for (let slash = path.indexOf('/'); slash !== -1 && slash <= end; slash = path.indexOf('/', slash + 1)) {
      const dir = path.slice(0, slash)
      if (open.length === 0 || dir.length > open.at(-1)!.length) open.push(dir)
    }

    if (self && (open.length === 0 || open.at(-1) !== path)) open.push(path)
  }

  for (const file of release.files) enter(file.path, false)
  close(() => false)
  // Empty directories (few) and those above them: any made read-only already is again.
  for (const dir of release.dirs ?? []) {
    enter(dir, true)
    close(() => false)
  }

  chmodSync(root, 0o555)
}

/** Read-only directories, deepest first, so nothing can be added to an installed tag. */
async function makeDirsReadOnly(root: string): Promise<void> {
  const dirs: string[] = []
  const walk = async (dir: string) => {
    dirs.push(dir)
    for (const entry of await readdir(dir, {withFileTypes: true})) if (entry.isDirectory()) await walk(join(dir, entry.name))
  }

  await walk(root)
  for (const dir of dirs.reverse()) await chmod(dir, 0o555)
}

/** The umask without changing it for more than an instant (Node offers no read-only call). */
function readUmask(): number {
  const mask = process.umask(0o022)
  process.umask(mask)
  return mask
}

async function syncFilesystem(path: string): Promise<void> {
  // coreutils `sync -f` is syncfs(2): one call flushes the whole filesystem's dirty data.
  await startChild('sync', ['-f', path]).exited
}

/**
 * What an install that failed reports: a LocalpuppetError as it is, a full disk or
 * another I/O failure as an IoError (74) naming the module directory, anything else
 * as it is (a bug).
 */
export function describeInstallError(error: unknown, moduleDir: string): unknown {
  if (error instanceof LocalpuppetError) return error
  return asIoError(error, `installing into ${moduleDir}`) ?? error
}
