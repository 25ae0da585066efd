import {randomBytes} from 'node:crypto'
import {mkdir, open, readFile, readdir, stat, unlink, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import {keyId, type loadSigningKey, signIndex} from '../archive/signature.js'
import {InputError, UsageError, asIoError, describeFsError} from '../errors.js'
import {onlyNodesChanged, writeNodeDocuments} from './node-documents/publish-documents.js'
import {markEncryptedInputs, openNodeTable} from './node-documents/node-table.js'
import {RunLock} from '../state/lock.js'
import {atomicTempWriter, writeSignedFileAtomic} from '../util/atomic-write.js'
import {isProcessAlive} from '../util/process.js'
import {
  DEFAULT_INDEX_EXPIRY_MS,
  MAX_REPOSITORY_INDEX_BYTES,
  type RepositoryIndex,
  REPOSITORY_INDEX,
  REPOSITORY_SIGNATURE,
  emptyRepositoryIndex,
  parseRepositoryIndex,
  serializeRepositoryIndex,
} from './repository-index.js'

/** The lock publishers of one repository take; hidden, so a web server's listing does not show it. */
const LOCK_FILE = '.localpuppet-publish.lock'

type SigningKey = Awaited<ReturnType<typeof loadSigningKey>>

/** How publish and promote change a repository's index. */
export interface IndexUpdateOptions {
  repo: string
  /** The Ed25519 private key that signs index.json (loadSigningKey): a signed repository must be signed again. */
  key: SigningKey | null
  /** How long to wait for another publisher's lock, in ms. */
  lockWaitMs?: number
  /** How long the new index is valid, in ms (DEFAULT_INDEX_EXPIRY_MS when absent). */
  expiresInMs?: number
  now?: () => number
  /** Run under the lock once the new index is written (publish --prune: removing the files it no longer lists); its failure fails nothing. */
  afterIndex?: () => Promise<void>
  /** A re-signing (publish with nothing to add): every node document is written again, with the new expiry. */
  resign?: boolean
}

export interface IndexUpdate {
  /** The repository's identity (drawn by its first publish, kept by every later one). */
  repository: string
  /** The key id that signed index.json, or null. */
  signedBy: string | null
  /** The new index's version (the previous one's + 1) and expiry; when indexWritten is false, those of index.json as it stands. */
  version: number
  expires: string
  /** Whether index.json was written (false: a documents-only change of node entries alone, which writes their documents only). */
  indexWritten: boolean
  /** The node documents written and removed (counts), the highest version written (null: none) and their expiry (null: none written). */
  nodeDocuments: {written: number; removed: number; version: number | null; expires: string | null}
}

/**
 * Changes a repository's index under its lock: `change` gets the index just read (so no
 * publisher loses another's work) and writes what it adds beside it first (archives, node
 * inputs); then the index gets the next version and a new expiry and is replaced, its
 * signature first and the index last, so a reader never sees an index naming a file that is
 * not there. Every change, even of nothing, re-signs: what lets nodes refuse a replayed
 * index and notice a frozen one. The repository's identity is drawn on its first publish
 * and kept ever after.
 */
export async function updateIndex<T>(options: IndexUpdateOptions, change: (index: RepositoryIndex) => Promise<T>): Promise<T & IndexUpdate> {
  const now = options.now ?? Date.now
  const expiresInMs = options.expiresInMs ?? DEFAULT_INDEX_EXPIRY_MS
  if (Number.isNaN(new Date(now() + expiresInMs).getTime())) throw new UsageError(`--expires: ${expiresInMs} ms from now is past the last date this localpuppet can write`)
  try {
    return await updateIndexLocked(options, now, expiresInMs, change)
  } catch (error) {
    // A full disk (or a read-only or failing one) anywhere in the repository is 74 naming it,
    // whatever was being written: the lock, an archive, an input, the index.
    throw asIoError(error, `repository ${options.repo}`) ?? error
  }
}

async function updateIndexLocked<T>(options: IndexUpdateOptions, now: () => number, expiresInMs: number, change: (index: RepositoryIndex) => Promise<T>): Promise<T & IndexUpdate> {
  const {key} = options
  await ensureRepoDir(options.repo)
  const lock = await RunLock.acquireFileWaiting(join(options.repo, LOCK_FILE), options.lockWaitMs ?? 120_000)
  try {
    await clearDebris(options.repo)
    const working = join(options.repo, `${WORKING}.${process.pid}`)
    await writeFile(working, '', {mode: 0o600})
    try {
      return await updateUnderLock(options, now, expiresInMs, key, change)
    } finally {
      await unlink(working).catch(() => {})
    }
  } finally {
    await lock.release()
  }
}

async function updateUnderLock<T>(options: IndexUpdateOptions, now: () => number, expiresInMs: number, key: SigningKey | null, change: (index: RepositoryIndex) => Promise<T>): Promise<T & IndexUpdate> {
  const {index, signed} = await readCurrentIndex(options.repo)
  if (signed && !key) throw new UsageError(`${options.repo} is a signed repository (${REPOSITORY_SIGNATURE}); publish with --sign KEY.pem`, ['an index without a fresh signature would be refused by every node'])
  // The index as read, to find which node documents the change touches; its nodes read from their documents when index.json lists none (node-documents/).
  const before = structuredClone(index)
  const table = openNodeTable(options.repo, index)
  const result = await change(index)
  // A change that replaced the node table of a documents-only index (not set or deleted in it) would publish nothing of it, silently: a bug (70).
  if (table !== null && index.nodes !== table.record) throw new Error('index.nodes was replaced by the change; a documents-only index is changed through its node table (node-documents/node-table.ts)')
  // Under the lock, from the index just read: two publishers never write the same version.
  // A new repository (or one whose publishers were older than identities) gets its identity
  // now; every later publish keeps it, so nodes can tell this repository from another.
  index.repository ??= randomBytes(16).toString('hex')
  markEncryptedInputs(index, table)
  const expires = new Date(now() + expiresInMs).toISOString()
  // Node entries alone changed, and index.json lists none: it stays as it is (publishing one node writes that node's input and document).
  const indexToo = !onlyNodesChanged(before, index, table)
  if (indexToo) {
    index.version = (index.version ?? 0) + 1
    index.expires = expires
  }

  // An index no node would read (over the bound every node reads, MAX_REPOSITORY_INDEX_BYTES) is refused before anything is written;
  // measured as written, with the nodeDocuments mark writeNodeDocuments sets (an index serialized before it lacked the mark, and nodes never read their documents).
  const sized = indexToo ? serializeRepositoryIndex(index.repository === undefined ? index : {...index, nodeDocuments: true}) : null
  if (sized && sized.length > MAX_REPOSITORY_INDEX_BYTES) {
    const nodes = Object.keys(index.nodes ?? {}).length
    throw new InputError(`${join(options.repo, REPOSITORY_INDEX)} would be ${sized.length} bytes, over the ${MAX_REPOSITORY_INDEX_BYTES} a node reads (${nodes} node inputs listed); nothing published`, [
      nodes > 0 ? 'publish with --node-documents-only: index.json then lists no node inputs, each node reads its own signed document (docs/delivery.md)' : 'remove tags or apps the repository no longer serves',
    ])
  }

  // Each changed node's document before the index (node-documents/): what a node reads instead of it.
  const documents = await writeNodeDocuments(options.repo, before, index, key, now(), {expires, table, resign: options.resign})
  const bytes = indexToo ? serializeRepositoryIndex(index) : null
  // The signature first, then the index, the last thing written (writeSignedFileAtomic). The next publish always writes a matching pair.
  // index.json not written: the documents go back to what the index says (a publish that fails publishes nothing).
  if (bytes)
    await writeSignedFileAtomic(join(options.repo, REPOSITORY_INDEX), bytes, key ? {path: join(options.repo, REPOSITORY_SIGNATURE), bytes: signIndex(bytes, key)} : null).catch(async (error: unknown) => {
      await documents.rollback().catch(() => {})
      throw error
    })
  await syncDir(options.repo)
  await documents.removeStale()
  await options.afterIndex?.().catch(() => {})
  const nodeDocuments = {written: documents.written.length, removed: documents.removed.length, version: documents.newestVersion, expires: documents.newestVersion === null ? null : expires}
  return {...result, repository: index.repository, signedBy: key ? keyId(key) : null, version: index.version!, expires: index.expires!, indexWritten: bytes !== null, nodeDocuments}
}

/** Marks a publisher at work (`.localpuppet-publishing.<pid>`, beside the lock): one that died leaves it, and the next looks for its temporary files everywhere. */
const WORKING = '.localpuppet-publishing'

/**
 * Removes what publishers killed mid-way left in the repository (a directory a web server
 * serves): their temporary archive, input, object, document, index and signature files and
 * their lock's temp file. Below the root (archives/, inputs/ and objects/ per app, node and
 * prefix, nodes/), only when a publisher died at work (its marker left): a look into every
 * node's directory at every publish would cost in proportion to the fleet. Called under the
 * lock, so no living publisher is writing any of them; a file whose writer's pid is alive is
 * left anyway (that pid is unrelated now, or the lock was wrong).
 */
async function clearDebris(repo: string): Promise<void> {
  const below = async (sub: string) => (await readdir(join(repo, sub)).catch(() => [] as string[])).map((name) => join(repo, sub, name))
  const dead = (pid: number | null): pid is number => pid !== null && pid !== process.pid && !isProcessAlive(pid)
  const markers = (await readdir(repo).catch(() => [] as string[])).filter((name) => dead(workingPublisher(name)))
  const dirs = [repo, ...(markers.length === 0 ? [] : [...(await below('archives')), ...(await below('inputs')), ...(await below('objects')), join(repo, 'nodes')])]
  for (const dir of dirs) {
    for (const name of await readdir(dir).catch(() => [] as string[])) {
      if (dead(atomicTempWriter(name) ?? (dir === repo ? lockTempHolder(name) : null))) await unlink(join(dir, name)).catch(() => {})
    }
  }

  for (const name of markers) await unlink(join(repo, name)).catch(() => {})
}

/** The pid in the name of a publisher's marker (`.localpuppet-publishing.<pid>`), or null. */
function workingPublisher(name: string): number | null {
  const match = new RegExp(`^${WORKING.replaceAll('.', '\\.')}\\.(\\d+)$`).exec(name)
  return match ? Number(match[1]) : null
}

/** The pid in the name of a lock's temp file (`.localpuppet-publish.lock.<pid>.<token>`), or null. */
function lockTempHolder(name: string): number | null {
  const match = new RegExp(`^${LOCK_FILE.replaceAll('.', '\\.')}\\.(\\d+)\\.[0-9a-f]{16}$`).exec(name)
  return match ? Number(match[1]) : null
}

/** Whether the repository has an index yet. */
export async function hasIndex(repo: string): Promise<boolean> {
  return stat(join(repo, REPOSITORY_INDEX)).then(
    () => true,
    () => false,
  )
}

/** The repository's index as it is now (an empty one when there is none yet), and whether it is signed. */
export async function readCurrentIndex(repo: string): Promise<{index: RepositoryIndex; signed: boolean}> {
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

async function ensureRepoDir(repo: string): Promise<void> {
  try {
    const info = await stat(repo)
    if (!info.isDirectory()) throw new UsageError(`repository ${repo}: not a directory`)
  } catch (error) {
    if (error instanceof UsageError) throw error
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw describeFsError(error, `repository ${repo}`)
    await mkdir(repo, {recursive: true, mode: 0o755})
  }
}

/** fsyncs a directory, so the renames in it survive a crash. */
export async function syncDir(dir: string): Promise<void> {
  const handle = await open(dir, 'r')
  try {
    await handle.sync()
  } catch {
    // Some filesystems refuse fsync on a directory; the renames are still atomic.
  } finally {
    await handle.close()
  }
}
