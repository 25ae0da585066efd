import {randomBytes} from 'node:crypto'
import {closeSync, lstatSync, mkdirSync, openSync, readFileSync, renameSync, rmSync, rmdirSync, writeSync} from 'node:fs'
import {dirname, join} from 'node:path'
import {gzipSync} from 'node:zlib'

import type {IndexSummary} from '../archive/release-index.js'
import {describeFsError} from '../errors.js'
import {readInstallRecord} from '../install/install-record.js'
import {startChild} from '../util/child.js'
import {type Manifest, MANIFEST_FORMAT, type TagObjects, objectPath, releaseParts, serializeManifest, sha256Of} from './objects.js'

/**
 * Writes a tag's objects into a repository (publish): each file of each release the
 * archive holds (read from `installed`, where the archive was just installed and proved
 * whole), each part of its file list and its manifest; an object already there is left as
 * it is (its name is its content). Gives what the index entry names, and how many objects
 * were written. Durable once it returns (one sync of the repository's filesystem), so the
 * index that names them is never ahead of them.
 */
export async function writeTagObjects(repo: string, installed: string, index: IndexSummary): Promise<TagObjects & {written: number}> {
  const store = new ObjectStore(repo)
  try {
    return await writeObjects(store, repo, installed, index)
  } catch (error) {
    // Called under the repository's lock: what this call wrote is nobody else's yet.
    store.undo()
    throw describeFsError(error, `repository ${repo}`)
  }
}

async function writeObjects(store: ObjectStore, repo: string, installed: string, index: IndexSummary): Promise<TagObjects & {written: number}> {
  const manifest: Manifest = {format: MANIFEST_FORMAT, releases: []}
  for (const entry of index.releases) {
    const record = await readInstallRecord(installed, entry.release)
    if (!record) throw new Error(`${entry.release}: installed without a record`)
    for (const file of record.files) {
      if (!store.has(file.sha256)) store.put(file.sha256, readFileSync(join(installed, entry.release, file.path)))
    }

    const parts = releaseParts(record.files)
    for (const part of parts) if (!store.has(part.sha256)) store.put(part.sha256, part.bytes)
    manifest.releases.push({
      release: entry.release,
      digest: entry.digest,
      ...(entry.dirs && entry.dirs.length > 0 ? {dirs: entry.dirs} : {}),
      parts: parts.map((part) => ({prefix: part.prefix, files: part.files.length, sha256: part.sha256, size: part.bytes.length})),
    })
  }

  const bytes = serializeManifest(manifest)
  const sha256 = sha256Of(bytes)
  if (!store.has(sha256)) store.put(sha256, bytes)
  if (store.written > 0) await startChild('sync', ['-f', repo]).exited
  return {manifest: sha256, size: bytes.length, written: store.written}
}

/** `objects/` of a repository: gzip files named by the sha256 of what they hold, written temp file then rename, 0644 for a web server. */
class ObjectStore {
  written = 0
  private readonly made = new Set<string>()
  /** Files and directories this store created, in order. */
  private readonly created: string[] = []

  constructor(private readonly repo: string) {}

  has(sha256: string): boolean {
    return lstatSync(join(this.repo, objectPath(sha256)), {throwIfNoEntry: false})?.isFile() ?? false
  }

  put(sha256: string, bytes: Buffer): void {
    const target = join(this.repo, objectPath(sha256))
    const dir = dirname(target)
    if (!this.made.has(dir)) {
      const first = mkdirSync(dir, {recursive: true, mode: 0o755})
      const chain: string[] = []
      if (first !== undefined) for (let at = dir; at.length >= first.length; at = dirname(at)) chain.push(at)
      this.created.push(...chain.reverse())
      this.made.add(dir)
    }

    // No name or time in the header: the same content gives the same bytes everywhere. zlib's
    // default level: on Debian's modules level 9 saves 0.2% of the bytes in the same time.
    const data = gzipSync(bytes, {level: 6})
    data[9] = 255
    const temp = join(dir, `.${sha256}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`)
    try {
      const fd = openSync(temp, 'wx', 0o644)
      try {
        for (let offset = 0; offset < data.length; ) offset += writeSync(fd, data, offset)
      } finally {
        closeSync(fd)
      }

      renameSync(temp, target)
    } catch (error) {
      rmSync(temp, {force: true})
      throw error
    }

    this.created.push(target)
    this.written++
  }

  /** Removes what this store created, newest first (a failed publish leaves the repository as it was). */
  undo(): void {
    for (const path of this.created.reverse()) {
      try {
        if (lstatSync(path).isDirectory()) rmdirSync(path)
        else rmSync(path, {force: true})
      } catch {
        // Left for the next publish (an object there is what its name says, or is replaced).
      }
    }
  }
}
