import {execFile} from 'node:child_process'
import {createHash, randomBytes} from 'node:crypto'
import {createReadStream} from 'node:fs'
import {copyFile, mkdir, mkdtemp, open, readFile, readdir, rename, rm, stat, unlink} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {basename, dirname, join, resolve} from 'node:path'

import {installArchive} from '../install/install-archive.js'
import {keyId, loadSigningKey, signIndex} from '../archive/signature.js'
import {ConflictError, ReleaseError, UsageError, describeFsError} from '../errors.js'
import {RunLock} from '../state/lock.js'
import {atomicTempWriter, prepareFileAtomic} from '../util/atomic-write.js'
import {isProcessAlive} from '../util/process.js'
import {readArchiveHead} from './archive-head.js'
import {
  DEFAULT_INDEX_EXPIRY_MS,
  type PublishedTag,
  type RepositoryIndex,
  REPOSITORY_INDEX,
  REPOSITORY_SIGNATURE,
  archivePathFor,
  emptyRepositoryIndex,
  parseRepositoryIndex,
  serializeRepositoryIndex,
} from './repository-index.js'

export interface PublishOptions {
  repo: string
  archives: string[]
  /** --sign: an Ed25519 private key (PEM) that signs index.json. */
  signingKey?: string
  /** How long to wait for another publisher's lock, in ms. */
  lockWaitMs?: number
  /** --expires: how long the new index is valid, in ms (DEFAULT_INDEX_EXPIRY_MS when absent). */
  expiresInMs?: number
  /** The clock (tests). */
  now?: () => number
}

export interface PublishedEntry {
  release: string
  archive: string
  size: number
  sha256: string
  status: 'added' | 'unchanged'
}

export interface PublishResult {
  repo: string
  releases: PublishedEntry[]
  /** The key id that signed index.json, or null. */
  signedBy: string | null
  /** The new index's version (the previous one's + 1) and expiry. */
  version: number
  expires: string
}

/** The lock publishers of one repository take; hidden, so a web server's listing does not show it. */
const LOCK_FILE = '.localpuppet-publish.lock'

/**
 * Adds archives made by `pack` to a release repository: a directory any static web
 * server can serve. Every archive is verified in full first. Under the repository's
 * lock, the current index is read again, each tag is checked (the same content is a
 * no-op; other content is a ConflictError, 73, and nothing changes), the archives are
 * copied in (temp file, fsync, rename) and the index is replaced last, so a reader never
 * sees an index naming an archive that is not there. Every publish, even of nothing new
 * (no archives: a re-signing), writes the index with the next version and a new expiry:
 * what lets nodes refuse a replayed index and notice a frozen one.
 */
export async function publishArchives(options: PublishOptions): Promise<PublishResult> {
  const repo = resolve(options.repo)
  const now = options.now ?? Date.now
  const expiresInMs = options.expiresInMs ?? DEFAULT_INDEX_EXPIRY_MS
  if (Number.isNaN(new Date(now() + expiresInMs).getTime())) throw new UsageError(`--expires: ${expiresInMs} ms from now is past the last date this localpuppet can write`)
  // Nothing to add and nothing to re-sign: most likely a mistyped --repo, which would otherwise become an empty repository.
  if (options.archives.length === 0 && !(await stat(join(repo, REPOSITORY_INDEX)).then(() => true, () => false))) {
    throw new UsageError(`nothing to publish: no archives given, and ${repo} has no ${REPOSITORY_INDEX} to re-sign`, ['give the archives made by localpuppet pack'])
  }

  await checkRepoDir(repo)
  const key = options.signingKey ? await loadSigningKey(options.signingKey) : null
  const candidates: Array<{source: string; tag: PublishedTag; release: string; app: string; tagName: string}> = []
  for (const archive of options.archives) candidates.push(await inspectArchive(archive))
  const seen = new Map<string, string>()
  for (const candidate of candidates) {
    const other = seen.get(candidate.release)
    if (other !== undefined && other !== candidate.tag.sha256) throw new ConflictError(`${candidate.release}: two different archives given for the same tag`)
    seen.set(candidate.release, candidate.tag.sha256)
  }

  const lock = await RunLock.acquireFileWaiting(join(repo, LOCK_FILE), options.lockWaitMs ?? 120_000)
  try {
    await clearDebris(repo)
    const {index, signed} = await readCurrentIndex(repo)
    if (signed && !key) throw new UsageError(`${repo} is a signed repository (${REPOSITORY_SIGNATURE}); publish with --sign KEY.pem`, ['an index without a fresh signature would be refused by every node'])
    const releases: PublishedEntry[] = []
    const toAdd: typeof candidates = []
    for (const candidate of candidates) {
      const existing = index.apps[candidate.app]?.tags[candidate.tagName]
      const entry = {release: candidate.release, archive: candidate.tag.archive, size: candidate.tag.size, sha256: candidate.tag.sha256}
      if (existing) {
        if (!sameContent(existing, candidate.tag)) {
          throw new ConflictError(`${candidate.release} is already published with other content (${existing.digest}; this archive: ${candidate.tag.digest})`, [
            'tags are immutable: publish a new tag',
          ])
        }

        releases.push({...entry, archive: existing.archive, size: existing.size, sha256: existing.sha256, status: 'unchanged'})
        continue
      }

      if (!toAdd.some((other) => other.release === candidate.release)) toAdd.push(candidate)
      releases.push({...entry, status: 'added'})
    }

    for (const candidate of toAdd) {
      await copyInto(candidate.source, join(repo, candidate.tag.archive))
      ;(index.apps[candidate.app] ??= {tags: {}}).tags[candidate.tagName] = candidate.tag
    }

    // Under the lock, from the index just read: two publishers never write the same version.
    index.version = (index.version ?? 0) + 1
    index.expires = new Date(now() + expiresInMs).toISOString()
    const bytes = serializeRepositoryIndex(index)
    // The signature first: a reader that gets the new signature with the old index retries
    // once and then sees both new. Then the index, the last thing written.
    // Both written and flushed first, then renamed back to back: a publisher killed between
    // the two renames (a reader's signature over another index until the next publish)
    // is down to microseconds. The next publish always writes a matching pair.
    const signature = key ? await prepareFileAtomic(join(repo, REPOSITORY_SIGNATURE), signIndex(bytes, key), 0o644) : null
    const indexFile = await prepareFileAtomic(join(repo, REPOSITORY_INDEX), bytes, 0o644).catch(async (error: unknown) => {
      await signature?.abort()
      throw error
    })
    try {
      signature?.commit()
      indexFile.commit()
    } finally {
      await signature?.abort()
      await indexFile.abort()
    }

    await syncDir(repo)
    return {repo, releases, signedBy: key ? keyId(key) : null, version: index.version, expires: index.expires}
  } finally {
    await lock.release()
  }
}

/**
 * Removes what publishers killed mid-way left in the repository (a directory a web server
 * serves): their temporary archive, index and signature files and their lock's temp file.
 * Called under the lock, so no living publisher is writing any of them; a file whose
 * writer's pid is alive is left anyway (that pid is unrelated now, or the lock was wrong).
 */
async function clearDebris(repo: string): Promise<void> {
  const dirs = [repo, ...(await readdir(join(repo, 'archives')).catch(() => [] as string[])).map((app) => join(repo, 'archives', app))]
  for (const dir of dirs) {
    for (const name of await readdir(dir).catch(() => [] as string[])) {
      const pid = atomicTempWriter(name) ?? (dir === repo ? lockTempHolder(name) : null)
      if (pid !== null && pid !== process.pid && !isProcessAlive(pid)) await unlink(join(dir, name)).catch(() => {})
    }
  }
}

/** The pid in the name of a lock's temp file (`.localpuppet-publish.lock.<pid>.<token>`), or null. */
function lockTempHolder(name: string): number | null {
  const match = new RegExp(`^${LOCK_FILE.replaceAll('.', '\\.')}\\.(\\d+)\\.[0-9a-f]{16}$`).exec(name)
  return match ? Number(match[1]) : null
}

async function checkRepoDir(repo: string): Promise<void> {
  try {
    const info = await stat(repo)
    if (!info.isDirectory()) throw new UsageError(`repository ${repo}: not a directory`)
  } catch (error) {
    if (error instanceof UsageError) throw error
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw describeFsError(error, `repository ${repo}`)
    await mkdir(repo, {recursive: true, mode: 0o755})
  }
}

/** Same content: the same releases with the same digests (a re-pack, or a signed copy, of the same tree). */
function sameContent(a: PublishedTag, b: PublishedTag): boolean {
  return a.modulepath.length === b.modulepath.length && a.modulepath.every((release, i) => release === b.modulepath[i] && a.digests[release] === b.digests[release])
}

/** Reads the archive's release.json and verifies every entry of it by installing into a throwaway directory. */
async function inspectArchive(path: string): Promise<{source: string; tag: PublishedTag; release: string; app: string; tagName: string}> {
  const source = resolve(path)
  let size: number
  try {
    const info = await stat(source)
    if (!info.isFile()) throw new UsageError(`archive ${path}: not a file`)
    size = info.size
  } catch (error) {
    if (error instanceof UsageError) throw error
    throw describeFsError(error, `archive ${path}`)
  }

  const {index, signedBy} = await readArchiveHead(source, path)
  if (index.tag === null) throw new ReleaseError(`${path}: ${index.release} is mutable; repositories hold tags only`, ['pack a tag'])
  const mutable = index.modulepath.find((release) => !release.includes('/tags/'))
  if (mutable) throw new ReleaseError(`${path}: ${index.release} carries mutable ${mutable}; repositories hold tags only`)
  const scratch = await mkdtemp(join(tmpdir(), 'localpuppet-publish-'))
  try {
    await installArchive(createReadStream(source, {highWaterMark: 1024 * 1024}), path, {moduleDir: scratch, trust: [], trustDir: null})
  } finally {
    await removeTree(scratch)
  }

  const sha256 = await hashFile(source)
  const tag: PublishedTag = {
    archive: archivePathFor(index.app, index.tag),
    size,
    sha256,
    digest: index.releases[0].digest,
    modulepath: index.modulepath,
    digests: Object.fromEntries(index.releases.map((r) => [r.release, r.digest])),
    signedBy,
    publishedAt: new Date().toISOString(),
  }
  return {source, tag, release: index.release, app: index.app, tagName: index.tag}
}

async function hashFile(path: string): Promise<string> {
  const hash = createHash('sha256')
  for await (const chunk of createReadStream(path, {highWaterMark: 1024 * 1024})) hash.update(chunk as Buffer)
  return hash.digest('hex')
}

async function readCurrentIndex(repo: string): Promise<{index: RepositoryIndex; signed: boolean}> {
  let bytes: Buffer
  try {
    bytes = await readFile(join(repo, REPOSITORY_INDEX))
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw describeFsError(error, `${repo}/${REPOSITORY_INDEX}`)
    return {index: emptyRepositoryIndex(), signed: false}
  }

  const signed = await stat(join(repo, REPOSITORY_SIGNATURE)).then(
    () => true,
    () => false,
  )
  return {index: parseRepositoryIndex(bytes, join(repo, REPOSITORY_INDEX)), signed}
}

/** Copies an archive into the repository: temp file, fsync, rename; 0644 so a web server can read it. */
async function copyInto(source: string, target: string): Promise<void> {
  await mkdir(dirname(target), {recursive: true, mode: 0o755})
  const temp = join(dirname(target), `.${basename(target)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`)
  try {
    await copyFile(source, temp)
    const handle = await open(temp, 'r+')
    try {
      await handle.chmod(0o644)
      await handle.sync()
    } finally {
      await handle.close()
    }

    await rename(temp, target)
  } catch (error) {
    await unlink(temp).catch(() => {})
    throw error
  }
}

async function syncDir(dir: string): Promise<void> {
  const handle = await open(dir, 'r')
  try {
    await handle.sync()
  } catch {
    // Some filesystems refuse fsync on a directory; the renames are still atomic.
  } finally {
    await handle.close()
  }
}

/** Removes a scratch module directory; installed tags in it are read-only. */
async function removeTree(dir: string): Promise<void> {
  await new Promise((done) => execFile('chmod', ['-R', 'u+w', dir], () => done(null)))
  await rm(dir, {recursive: true, force: true})
}
