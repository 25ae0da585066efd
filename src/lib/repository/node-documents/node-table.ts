import {readFileSync, readdirSync} from 'node:fs'
import {join} from 'node:path'

import {describeFsError} from '../../errors.js'
import type {PublishedInput, RepositoryIndex} from '../repository-index.js'
import {MAX_NODE_DOCUMENT_BYTES, NODE_DOCUMENTS_DIR, nodeDocumentPath, parseNodeDocument} from './document.js'

/**
 * The node table of a repository whose index.json lists no nodes (`nodesInDocuments`:
 * `publish --node-documents-only`), read from the documents as the publisher's code asks:
 * one entry reads one document, listing them all reads every document. What was set or
 * removed is remembered, with what it was before, so that only those documents are written.
 */
export interface NodeTable {
  /** The nodes set or removed since the table was opened. */
  touched(): string[]
  /** The entries as they were when the table was opened (every document read). */
  before(): Record<string, PublishedInput>
  /** The entries as they are now (every document read). */
  after(): Record<string, PublishedInput>
  /** The record put in `index.nodes`: a change that replaced it (instead of setting or deleting entries in it) would be lost. */
  record: Record<string, PublishedInput>
}

/** Reads one node's entry from its document (undefined: none); the publisher's own copy, parsed as a node would. */
function readEntry(repo: string, repository: string, node: string): PublishedInput | undefined {
  const path = join(repo, nodeDocumentPath(repository, node))
  let bytes: Buffer
  try {
    bytes = readFileSync(path)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT' || (error as NodeJS.ErrnoException).code === 'ENAMETOOLONG') return undefined
    throw describeFsError(error, path)
  }

  return parseNodeDocument(bytes.subarray(0, MAX_NODE_DOCUMENT_BYTES + 1), path, {node, repository}).input
}

/**
 * Every node's entry, from the documents under `nodes/`: each one parsed, and kept only where
 * its path is its own (a document copied under another name is not a node of the repository).
 */
export function readNodeTable(repo: string, repository: string): Record<string, PublishedInput> {
  const dir = join(repo, NODE_DOCUMENTS_DIR)
  let names: string[]
  try {
    names = readdirSync(dir)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return {}
    throw describeFsError(error, dir)
  }

  const table: Record<string, PublishedInput> = {}
  for (const name of names.filter((name) => /^[0-9a-f]{64}\.json$/.test(name)).sort()) {
    const path = join(dir, name)
    let node: unknown
    try {
      node = (JSON.parse(readFileSync(path, 'utf8')) as {node?: unknown}).node
    } catch {
      continue
    }

    if (typeof node !== 'string' || nodeDocumentPath(repository, node) !== `${NODE_DOCUMENTS_DIR}/${name}`) continue
    const entry = readEntry(repo, repository, node)
    if (entry !== undefined) table[node] = entry
  }

  return Object.fromEntries(Object.keys(table).sort().map((node) => [node, table[node]]))
}

/**
 * For an index whose nodes are in their documents only: `index.nodes` becomes a table read
 * from the documents as it is used (see NodeTable); null for any other index (its nodes are
 * in it). Synchronous reads: the code that uses the table reads a record, not a promise.
 */
export function openNodeTable(repo: string, index: RepositoryIndex): NodeTable | null {
  if (index.nodesInDocuments !== true || index.repository === undefined) return null
  const repository = index.repository
  const loaded = new Map<string, PublishedInput | undefined>()
  const originals = new Map<string, PublishedInput | undefined>()
  let all = false
  const load = (node: string) => {
    if (!loaded.has(node)) loaded.set(node, all ? undefined : readEntry(repo, repository, node))
    return loaded.get(node)
  }

  const loadAll = () => {
    if (all) return
    for (const [node, entry] of Object.entries(readNodeTable(repo, repository))) if (!loaded.has(node)) loaded.set(node, entry)
    all = true
  }

  const remember = (node: string) => {
    if (!originals.has(node)) originals.set(node, load(node))
  }

  const present = () => {
    loadAll()
    return Object.fromEntries([...loaded].filter(([, entry]) => entry !== undefined).sort(([a], [b]) => (a < b ? -1 : 1))) as Record<string, PublishedInput>
  }

  const record = new Proxy({} as Record<string, PublishedInput>, {
    get: (_target, key) => (typeof key === 'string' ? load(key) : undefined),
    has: (_target, key) => typeof key === 'string' && load(key) !== undefined,
    getOwnPropertyDescriptor(_target, key) {
      const entry = typeof key === 'string' ? load(key) : undefined
      return entry === undefined ? undefined : {value: entry, writable: true, enumerable: true, configurable: true}
    },
    ownKeys: () => Object.keys(present()),
    set(_target, key, value: PublishedInput) {
      if (typeof key !== 'string') return false
      remember(key)
      loaded.set(key, value)
      return true
    },
    deleteProperty(_target, key) {
      if (typeof key !== 'string') return false
      remember(key)
      loaded.set(key, undefined)
      return true
    },
  })
  index.nodes = record
  return {
    record,
    touched: () => [...originals.keys()],
    after: present,
    before() {
      const now = present()
      for (const [node, entry] of originals) {
        if (entry === undefined) delete now[node]
        else now[node] = entry
      }

      return now
    },
  }
}

/**
 * The node entries a check of the whole table reads (publish's refusal of a plain input
 * among encrypted ones): the index's own, or, when its nodes are in their documents, none at
 * all unless the index says some input is encrypted (`encryptedInputs`), so that publishing
 * a plain input does not read every document.
 */
export function nodesForSealCheck(index: RepositoryIndex): Record<string, PublishedInput> | undefined {
  return index.nodesInDocuments === true && index.encryptedInputs !== true ? {} : index.nodes
}

/** Marks an index whose nodes are in their documents when an encrypted input is among them (`encryptedInputs`, never unmarked: a later plain input is then checked against every document). */
export function markEncryptedInputs(index: RepositoryIndex, table: NodeTable | null): void {
  if (index.nodesInDocuments !== true || index.encryptedInputs === true) return
  const entries = table === null ? Object.values(index.nodes ?? {}) : table.touched().map((node) => index.nodes?.[node])
  if (entries.some((entry) => entry?.encrypted !== undefined)) index.encryptedInputs = true
}
