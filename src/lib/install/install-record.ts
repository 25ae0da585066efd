import {createHash} from 'node:crypto'
import {closeSync, constants, openSync} from 'node:fs'
import {mkdir, readFile, readdir} from 'node:fs/promises'
import {join} from 'node:path'

import {DamagedRecordError} from '../errors.js'
import {writeFileAtomic} from '../util/atomic-write.js'
import {JsonReader, JsonStreamError, fdSource} from '../util/json-stream.js'
import {type TrustOptions, assertTrustedPaths} from '../util/trusted-path.js'
import type {TreeFile} from '../tree/release-tree.js'

/**
 * localpuppet's own directory inside a module directory: install records, the install
 * lock and staging. Never a modulepath entry (those are release roots), and no app name
 * can start with a dot, so Puppet never sees it as a module.
 */
export const LOCALPUPPET_DIR = '.localpuppet'

export type InstallSource =
  | {type: 'archive'; path: string; sha256: string}
  | {type: 'git'; repo: string; tag: string; commit: string}
  /** Installed by dpkg from a package made by `pack --format deb`: dpkg owns the files. */
  | {type: 'deb'; package: string; version: string}

/** What an installed tag held when it was installed; `verify` compares against it. */
export interface InstallRecord {
  format: 1
  release: string
  digest: string
  files: TreeFile[]
  /** Empty directories the release keeps; absent when there are none. */
  dirs?: string[]
  installedAt: string
  source: InstallSource
  /** The trusted key that signed the archive, or null. */
  signedBy: string | null
}

export function localpuppetDir(moduleDir: string): string {
  return join(moduleDir, LOCALPUPPET_DIR)
}

/**
 * What an install writes into and a run believes: the module directory (and the path to
 * it) and localpuppet's own directory in it (install records, the lock, staging). Whoever
 * can write either can swap a tag, or forge the record it is verified against.
 */
export function moduleDirTrustPaths(moduleDir: string): Array<{path: string} & TrustOptions> {
  const own = localpuppetDir(moduleDir)
  return [
    {path: moduleDir, what: 'module directory'},
    {path: own, what: 'module directory', below: moduleDir},
    {path: join(own, 'records'), what: 'install records directory', below: own},
    // fetch writes archives here, then checks and installs them by name: another user's directory could swap one in between.
    {path: join(own, 'downloads'), what: 'downloads directory', below: own},
  ]
}

/**
 * Refuses (UntrustedPathError, 77) a module directory another user owns or others can
 * write, unless `allow` (--allow-untrusted); returns the problems allowed.
 */
export function assertTrustedModuleDir(moduleDir: string, allow = false, seen?: Set<string>): string[] {
  return assertTrustedPaths(moduleDirTrustPaths(moduleDir), allow, seen)
}

/** `<module-dir>/.localpuppet/records/foo/tags/1.0.0.json` */
export function recordPath(moduleDir: string, release: string): string {
  return join(localpuppetDir(moduleDir), 'records', `${release}.json`)
}

/**
 * The whole record, every file as an object: for small uses. What walks the files
 * (verify) reads them with openInstallRecord, a batch at a time; what needs only the
 * digest reads the head (readRecordHead).
 */
export async function readInstallRecord(moduleDir: string, release: string): Promise<InstallRecord | null> {
  try {
    return JSON.parse(await readFile(recordPath(moduleDir, release), 'utf8')) as InstallRecord
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null
    throw error
  }
}

/** A record's fields other than its file list. */
export type RecordFields = Partial<Omit<InstallRecord, 'files'>>

/** The file list a record batch by batch: about this many characters of it at a time (some 400 files). */
const RECORD_BATCH_CHARS = 64 * 1024

/**
 * An install record read as it is walked, so that memory does not grow with the number
 * of files it lists (a record is some 160 bytes a file: 15 MB for 100,000): the fields
 * before the file list, then the files in batches, then the fields after. Every record
 * localpuppet writes has format, release and digest before the files (recordText).
 */
export class RecordStream {
  /** The fields read so far: those before the file list once head() returned, all of them once files() ended. */
  readonly fields: RecordFields = {}
  private readonly reader: JsonReader
  private atFiles = false

  private constructor(
    readonly path: string,
    private readonly fd: number,
  ) {
    this.reader = new JsonReader(fdSource(fd))
  }

  /** Opens the record of a release (null when there is none); close() it after. */
  static open(moduleDir: string, release: string): RecordStream | null {
    const path = recordPath(moduleDir, release)
    let fd: number
    try {
      fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK)
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null
      throw error
    }

    return new RecordStream(path, fd)
  }

  /**
   * sha256 of the record's bytes, read from the open file (the one whose files are then
   * read, whatever is renamed over its path meanwhile): what the verification keys are
   * checked against.
   */
  fingerprint(): string {
    const hash = createHash('sha256')
    const source = fdSource(this.fd)
    const buffer = Buffer.allocUnsafe(256 * 1024)
    for (let read; (read = source(buffer)) > 0; ) hash.update(buffer.subarray(0, read))
    return `sha256:${hash.digest('hex')}`
  }

  /** The fields before the file list (the digest among them). */
  head(): RecordFields {
    this.guard(() => {
      this.reader.enterObject()
      this.readFields()
    })
    return this.fields
  }

  /** The files in the record's order, a batch at a time; the fields after them are in `fields` once it ends. */
  *files(): Generator<TreeFile[]> {
    if (!this.atFiles) this.head()
    if (this.atFiles) {
      this.guard(() => this.reader.enterArray())
      for (;;) {
        const batch = this.guard(() => this.reader.elements(RECORD_BATCH_CHARS)) as TreeFile[]
        if (batch.length === 0) break
        for (const file of batch) if (typeof file?.path !== 'string') this.damaged(`a file without a path (${JSON.stringify(file)?.slice(0, 100)})`)
        yield batch
      }

      this.atFiles = false
      this.guard(() => this.readFields())
    }

    this.guard(() => this.reader.finish())
  }

  /** Reads fields up to the file list (then atFiles) or the end of the record. */
  private readFields(): void {
    for (let key; (key = this.reader.key()) !== null; ) {
      if (key === 'files') {
        this.atFiles = true
        return
      }

      ;(this.fields as Record<string, unknown>)[key] = this.reader.value()
    }
  }

  close(): void {
    closeSync(this.fd)
  }

  private guard<T>(read: () => T): T {
    try {
      return read()
    } catch (error) {
      if (error instanceof JsonStreamError) this.damaged(error.message)
      throw error
    }
  }

  private damaged(why: string): never {
    throw new DamagedRecordError(`${this.path} is damaged: ${why}`, ['install the tag again: remove it and its record first'])
  }
}

/** The fields of a record before its file list (its digest among them), without reading the files; null when there is none. */
export function readRecordHead(moduleDir: string, release: string): RecordFields | null {
  const record = RecordStream.open(moduleDir, release)
  if (!record) return null
  try {
    return {...record.head()}
  } finally {
    record.close()
  }
}

/** Every field of a record but its file list (the files read a batch at a time and dropped); null when there is none. */
export function readRecordFields(moduleDir: string, release: string): RecordFields | null {
  const record = RecordStream.open(moduleDir, release)
  if (!record) return null
  try {
    for (const _batch of record.files());
    return {...record.fields}
  } finally {
    record.close()
  }
}

/** A record to write: its files may come as they are read (from an archive's release.json). */
export type RecordToWrite = Omit<InstallRecord, 'files'> & {files: Iterable<TreeFile>}

export async function writeInstallRecord(moduleDir: string, record: RecordToWrite): Promise<void> {
  const path = recordPath(moduleDir, record.release)
  await mkdir(join(path, '..'), {recursive: true, mode: 0o755})
  await writeFileAtomic(path, recordText(record), 0o644)
}

/**
 * `JSON.stringify(record)` and a newline, in pieces of about 64 KiB: a record lists every
 * file (15 MB for 100,000 files), and one string of it, then its bytes, is memory that
 * grows with the release.
 */
export function* recordText(record: RecordToWrite): Iterable<string> {
  let text = '{'
  let first = true
  for (const [key, value] of Object.entries(record)) {
    if (value === undefined) continue
    text += `${first ? '' : ','}${JSON.stringify(key)}:`
    first = false
    if (key !== 'files') {
      text += JSON.stringify(value)
      continue
    }

    text += '['
    let firstFile = true
    for (const file of value as Iterable<TreeFile>) {
      text += `${firstFile ? '' : ','}${JSON.stringify(file)}`
      firstFile = false
      if (text.length >= 64 * 1024) {
        yield text
        text = ''
      }
    }

    text += ']'
  }

  yield `${text}}\n`
}

/** Release paths (`foo/tags/1.0.0`) that have an install record. */
export async function listRecordedReleases(moduleDir: string): Promise<string[]> {
  const root = join(localpuppetDir(moduleDir), 'records')
  const found: string[] = []
  let apps: string[]
  try {
    apps = await readdir(root)
  } catch {
    return []
  }

  for (const app of apps) {
    let tags: string[] = []
    try {
      tags = await readdir(join(root, app, 'tags'))
    } catch {
      // An app without recorded tags: nothing to list for it.
    }

    for (const name of tags) if (name.endsWith('.json')) found.push(`${app}/tags/${name.slice(0, -'.json'.length)}`)
  }

  return found.sort()
}
