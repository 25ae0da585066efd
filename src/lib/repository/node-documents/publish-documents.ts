import type {KeyObject} from 'node:crypto'
import {mkdir, readFile, rm} from 'node:fs/promises'
import {join} from 'node:path'

import {keyId} from '../../archive/signature.js'
import {ReleaseError} from '../../errors.js'
import {type RepositoryIndex, REPOSITORY_SIGNATURE} from '../repository-index.js'
import {writeSignedFileAtomic} from '../../util/atomic-write.js'
import {isMapping} from '../../util/json.js'
import {type DocumentChanges, changedDocuments, canonicalJson} from './changed.js'
import type {NodeTable} from './node-table.js'
import {removeOrphanDocuments} from './orphans.js'
import {clearUnfinished, markUnfinished} from './unfinished.js'
import {own} from '../../util/own.js'
import {MAX_NODE_DOCUMENT_BYTES, NODE_DOCUMENTS_DIR, buildNodeDocument, nodeDocumentPath, serializeNodeDocument, signNodeDocument} from './document.js'

/** How many documents are written at once. */
const CONCURRENCY = 8

/** What writeNodeDocuments did: the documents written and removed (their nodes), and whether it was all of them. */
export interface DocumentsWritten {
  all: boolean
  written: string[]
  /** The highest version among the documents written (null: none written). */
  newestVersion: number | null
  /** Removed only by `removeStale`, after the index: a node whose input is gone reads the index. */
  removed: string[]
  removeStale(): Promise<void>
  /** When index.json could not be written: the documents written again as the index before the update says (the failed update's removed). */
  rollback(): Promise<void>
}

/**
 * A document's version: one more than the copy it replaces, and at least the publisher's
 * clock in milliseconds, so a document removed (its node pruned) and written again later
 * still passes the version a node accepted from the one before.
 */
async function nextDocumentVersion(path: string, now: number): Promise<number> {
  const previous = await readFile(path).then(
    (bytes) => {
      try {
        const doc: unknown = JSON.parse(bytes.subarray(0, MAX_NODE_DOCUMENT_BYTES).toString('utf8'))
        return isMapping(doc) && Number.isSafeInteger(doc.version) ? (doc.version as number) : 0
      } catch {
        return 0
      }
    },
    () => 0,
  )
  return Math.max(previous + 1, Math.floor(now))
}

/** The key id that signed the repository's index before this update (from index.json.sig), or null. */
async function previousSigner(repo: string): Promise<string | null> {
  try {
    const signature: unknown = JSON.parse(await readFile(join(repo, REPOSITORY_SIGNATURE), 'utf8'))
    return isMapping(signature) && typeof signature.keyId === 'string' ? signature.keyId : null
  } catch {
    return null
  }
}

/** An index's content but for its nodes, version and expiry: what tells a renewal, or a change of node entries alone. */
function rest(index: RepositoryIndex): string {
  return canonicalJson({...index, nodes: undefined, version: 0, expires: '', nodeDocuments: true})
}

/**
 * Whether an update of an index whose nodes are in their documents only (`table`) changed
 * node entries and nothing else: then index.json is left as it is, and only those nodes'
 * documents are written.
 */
export function onlyNodesChanged(before: RepositoryIndex, after: RepositoryIndex, table: NodeTable | null): boolean {
  return table !== null && table.touched().length > 0 && rest(before) === rest(after)
}

/** Which documents to write and remove: from the node table's changes when only node entries changed, else by diffing the whole tables. */
async function documentChanges(repo: string, before: RepositoryIndex, after: RepositoryIndex, key: KeyObject | null, table: NodeTable | null, resign: boolean): Promise<DocumentChanges | null> {
  // A re-signing (resign) writes every document, as another signing key does: a switch to documents only is one too.
  const rekeyed = resign || (key !== null && (await previousSigner(repo)) !== keyId(key))
  if (table !== null) {
    if (!rekeyed && onlyNodesChanged(before, after, table)) {
      const touched = table.touched()
      return {all: false, write: touched.filter((node) => own(after.nodes, node) !== undefined), remove: touched.filter((node) => own(after.nodes, node) === undefined)}
    }

    const renewal = rest(before) === rest(after) && table.touched().length === 0
    return changedDocuments({...before, nodes: table.before()}, {...after, nodes: table.after()}, {all: renewal || rekeyed})
  }

  const hasNodes = Object.keys(after.nodes ?? {}).length > 0 || Object.keys(before.nodes ?? {}).length > 0
  if (!hasNodes) return null
  const renewal = canonicalJson({...before, version: 0, expires: '', nodeDocuments: true}) === canonicalJson({...after, version: 0, expires: '', nodeDocuments: true})
  return changedDocuments(before, after, {all: renewal || rekeyed || before.nodeDocuments !== true})
}

/**
 * Writes the node documents an index update changes (see changedDocuments), each with its
 * signature first and the document last, as the index is, before the index is replaced (its
 * caller's next step): a reader never sees a document naming an input not yet there. Every
 * document is written again when the update changes nothing else (a renewal of expiry), when
 * another key signs, or when the index had no documents yet. `expires`: the new documents'
 * expiry. `table`: the index's nodes are in their documents only (node-table.ts). Called under
 * the publishers' lock.
 */
export async function writeNodeDocuments(
  repo: string,
  before: RepositoryIndex,
  after: RepositoryIndex,
  key: KeyObject | null,
  now: number,
  options: {expires: string; table: NodeTable | null; resign?: boolean},
): Promise<DocumentsWritten> {
  const changes = after.repository === undefined ? null : await documentChanges(repo, before, after, key, options.table, options.resign === true)
  // No node before or after: nothing to write, but what a failed update left under nodes/ goes (orphans.ts, unfinished.ts).
  const leftovers = async () => {
    if (after.repository !== undefined && options.table === null) await removeOrphanDocuments(repo, after.repository, [])
    await clearUnfinished(repo)
  }

  if (changes === null) return {all: false, written: [], newestVersion: null, removed: [], removeStale: leftovers, rollback: async () => {}}
  assertDocumentSizes(after, changes.write)
  after.nodeDocuments = true
  await mkdir(join(repo, NODE_DOCUMENTS_DIR), {recursive: true, mode: 0o755})
  // Recorded before the first document, cleared after the index (unfinished.ts); an earlier update's unfinished ones written again.
  const again = await markUnfinished(repo, after.repository!, changes.write, () => Object.keys(after.nodes ?? {}))
  const touched = [...new Set([...changes.write, ...again])]
  const rollback = async () => {
    // The index before the update, with its node table (a documents-only index's, from the entries the update replaced).
    const old = {...before, repository: after.repository, nodes: options.table ? options.table.before() : before.nodes}
    await writeEach(touched, async (node) => {
      if (own(old.nodes, node) !== undefined) {
        await writeOne(repo, old, node, key, now, options.expires)
        return
      }

      const path = join(repo, nodeDocumentPath(after.repository!, node))
      await rm(path, {force: true})
      await rm(`${path}.sig`, {force: true})
    })
    await clearUnfinished(repo)
  }

  // One document that cannot be written (a full disk): those written go back, nothing half-published.
  let newestVersion: number | null = null
  await writeEach(touched, async (node) => {
    const version = await writeOne(repo, after, node, key, now, options.expires)
    if (version !== undefined) newestVersion = Math.max(newestVersion ?? 0, version)
  }).catch(async (error: unknown) => {
    await rollback().catch(() => {})
    throw error
  })
  const repository = before.repository
  return {
    all: changes.all,
    written: changes.write,
    newestVersion,
    removed: changes.remove,
    async removeStale() {
      await clearUnfinished(repo)
      if (repository === undefined) return
      for (const node of changes.remove) {
        const path = join(repo, nodeDocumentPath(repository, node))
        await rm(path, {force: true})
        await rm(`${path}.sig`, {force: true})
      }

      // index.json lists the nodes: any other document is a removed node's left behind (orphans.ts).
      if (options.table === null) await removeOrphanDocuments(repo, repository, Object.keys(after.nodes ?? {}))
    },
    rollback,
  }
}

/** `write` for each node, CONCURRENCY at a time; on a failure, none started after it, and the first error once every write under way has ended (a rollback must not race one). */
async function writeEach(nodes: string[], write: (node: string) => Promise<void>): Promise<void> {
  const queue = [...nodes]
  const worker = async () => {
    for (let node = queue.shift(); node !== undefined; node = queue.shift()) {
      await write(node).catch((error: unknown) => {
        queue.length = 0
        throw error
      })
    }
  }

  const failed = (await Promise.allSettled(Array.from({length: Math.min(CONCURRENCY, queue.length)}, worker))).find((result) => result.status === 'rejected')
  if (failed) throw (failed as PromiseRejectedResult).reason
}

/** 65 naming the first node whose document no node would read (over MAX_NODE_DOCUMENT_BYTES), before any is written: nothing half-published. */
function assertDocumentSizes(index: RepositoryIndex, nodes: string[]): void {
  for (const node of nodes) {
    const document = buildNodeDocument(index, node, Number.MAX_SAFE_INTEGER, index.expires!)
    const size = document === undefined ? 0 : serializeNodeDocument(document).length
    if (size > MAX_NODE_DOCUMENT_BYTES) {
      throw new ReleaseError(`node ${node}: its document would be ${size} bytes, over the ${MAX_NODE_DOCUMENT_BYTES} a node reads (its app reference matches too many tags, or there are too many layers); nothing published`, [
        'point its app at a narrower range, a tag or a channel',
      ])
    }
  }
}

/** Writes one node's document and signature; its version, or undefined when the index has no such node. */
async function writeOne(repo: string, index: RepositoryIndex, node: string, key: KeyObject | null, now: number, expires: string): Promise<number | undefined> {
  const path = join(repo, nodeDocumentPath(index.repository!, node))
  const document = buildNodeDocument(index, node, await nextDocumentVersion(path, now), expires)
  if (document === undefined) return undefined
  const bytes = serializeNodeDocument(document)
  await writeSignedFileAtomic(path, bytes, key ? {path: `${path}.sig`, bytes: signNodeDocument(bytes, key)} : null)
  return document.version
}
