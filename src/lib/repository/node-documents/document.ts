import {createHash, sign, type KeyObject} from 'node:crypto'

import {keyId, verifyIndexSignature} from '../../archive/signature.js'
import {ReleaseError} from '../../errors.js'
import {parseReleaseRef, isSemverTag} from '../../release/release-ref.js'
import {type PublishedInput, type PublishedTag, type RepositoryIndex, REPOSITORY_FORMAT, REPOSITORY_ID, isValidNodeName, parseRepositoryIndex, sorted} from '../repository-index.js'
import type {PublishedLayer} from '../../layers/published-layers.js'
import {isMapping} from '../../util/json.js'
import {nestingDepth} from './nesting.js'
import {own} from '../../util/own.js'
import semver from 'semver'

/** The format of a node document (`nodes/<h>.json`); a node refuses any other. */
export const NODE_DOCUMENT_FORMAT = 1
/** A node document larger than this is refused before parsing (it holds one node's entries, not the fleet's). */
export const MAX_NODE_DOCUMENT_BYTES = 2 * 1024 * 1024
/** A node document nests 6 levels (apps.<app>.tags.<tag>.digests); one deeper than this is refused before any walk of it. */
export const MAX_NODE_DOCUMENT_DEPTH = 32
/** Where the documents are, at the repository's root. */
export const NODE_DOCUMENTS_DIR = 'nodes'

/**
 * What one node reads of a repository instead of index.json: its own input's entry, the
 * layers, and the tags and channel its app reference can resolve to, signed by the index's
 * key. Everything an index-reading fetch of this node needs, nothing of any other node.
 */
export interface NodeDocument {
  format: typeof NODE_DOCUMENT_FORMAT
  kind: 'node'
  node: string
  repository: string
  /** Monotonic per document (see nextDocumentVersion); a node refuses one older than it accepted. */
  version: number
  expires: string
  input: PublishedInput
  layers: Record<string, PublishedLayer>
  apps: Record<string, {tags: Record<string, PublishedTag>; channels?: Record<string, string>}>
}

/**
 * A document's path: `nodes/<sha256 of repository id, NUL, node name>.json`, so a listing of
 * `nodes/` names no node (a name can still be guessed and its hash checked: names are not
 * secret, as `inputs/<node>/` already shows them).
 */
export function nodeDocumentPath(repository: string, node: string): string {
  return `${NODE_DOCUMENTS_DIR}/${createHash('sha256').update(`${repository}\0${node}`).digest('hex')}.json`
}

export function nodeDocumentSignaturePath(repository: string, node: string): string {
  return `${nodeDocumentPath(repository, node)}.sig`
}

/**
 * What is signed: the document's bytes after this prefix, so that a document's signature never
 * verifies as index.json's, nor an index's as a document's (the same key signs both): a
 * document served as index.json is refused by every node, old ones too.
 */
const SIGNING_DOMAIN = Buffer.from('localpuppet node document\0')

export function signNodeDocument(bytes: Buffer, key: KeyObject): Buffer {
  return Buffer.from(JSON.stringify({algorithm: 'ed25519', keyId: keyId(key), signature: sign(null, Buffer.concat([SIGNING_DOMAIN, bytes]), key).toString('base64')}) + '\n')
}

/** The key id that signed a document (65 naming `where` when none of the trusted keys did). */
export function verifyNodeDocumentSignature(bytes: Buffer, signature: Buffer | null, trusted: KeyObject[], where: string): string {
  return verifyIndexSignature(Buffer.concat([SIGNING_DOMAIN, bytes]), signature, trusted, where)
}

/**
 * The tags of `app` a reference (as a node input writes it) can resolve to: the tag, the
 * channel's tag, or every tag a range matches (yanked ones too, with their yank, so a node
 * sees a range skip them as it would in the index), plus a tag a range names exactly.
 */
export function appSection(index: RepositoryIndex, reference: string): NodeDocument['apps'] {
  let ref
  try {
    ref = parseReleaseRef(reference, 'app')
  } catch {
    return {}
  }

  const entry = own(index.apps, ref.app)
  if (entry === undefined) return {}
  const pick = (names: string[]) => Object.fromEntries(names.filter((tag) => Object.hasOwn(entry.tags, tag)).map((tag) => [tag, entry.tags[tag]]))
  if (ref.kind === 'tag') return {[ref.app]: {tags: pick([ref.tag])}}
  if (ref.kind === 'channel') {
    const tag = own(entry.channels, ref.channel)
    return tag === undefined ? {[ref.app]: {tags: {}}} : {[ref.app]: {tags: pick([tag]), channels: {[ref.channel]: tag}}}
  }

  if (ref.kind === 'range') {
    const matches = Object.keys(entry.tags).filter((tag) => tag === ref.range || (isSemverTag(tag) && semver.satisfies(tag, ref.range)))
    return {[ref.app]: {tags: pick(matches)}}
  }

  return {}
}

/** What a node's document says that depends on the index (all but its version and expiry); undefined when the index lists no such node. */
export function documentBody(index: RepositoryIndex, node: string): Pick<NodeDocument, 'input' | 'layers' | 'apps'> | undefined {
  const input = own(index.nodes, node)
  if (input === undefined) return undefined
  // Every layer: which ones a node's input names is known only to whoever can read the input (it may be encrypted).
  return {input, layers: index.layers ?? {}, apps: appSection(index, input.app)}
}

/** The document of `node` as the index says, with its own version and expiry. */
export function buildNodeDocument(index: RepositoryIndex, node: string, version: number, expires: string): NodeDocument | undefined {
  const body = documentBody(index, node)
  if (body === undefined || index.repository === undefined) return undefined
  return {format: NODE_DOCUMENT_FORMAT, kind: 'node', node, repository: index.repository, version, expires, ...body}
}

/** Sorted keys at every level the index sorts, so one document always serialises to the same bytes. */
export function serializeNodeDocument(document: NodeDocument): Buffer {
  const apps = Object.fromEntries(
    Object.keys(document.apps)
      .sort()
      .map((app) => {
        const {tags, channels} = document.apps[app]
        return [app, {tags: sorted(tags), ...(channels ? {channels: sorted(channels)} : {})}]
      }),
  )
  const {format, kind, node, repository, version, expires, input} = document
  return Buffer.from(JSON.stringify({format, kind, node, repository, version, expires, input, layers: sorted(document.layers), apps}) + '\n')
}

/**
 * Parses a node document trusting nothing: its size, format, kind, node (must be `node`:
 * another node's document, or the index itself, is refused), repository id (must be
 * `repository`, the one its path was computed from), version and expiry, and then every
 * entry exactly as parseRepositoryIndex checks an index's (input path, sizes, hashes, tags,
 * channels, layers). Any fault is a ReleaseError (65) naming `where` and the key.
 */
export function parseNodeDocument(bytes: Buffer, where: string, expect: {node: string; repository: string}): NodeDocument {
  const fail = (why: string): never => {
    throw new ReleaseError(`${where}: ${why}; refused`)
  }

  if (bytes.length > MAX_NODE_DOCUMENT_BYTES) fail(`larger than ${MAX_NODE_DOCUMENT_BYTES} bytes`)
  let doc: unknown
  try {
    doc = JSON.parse(bytes.toString('utf8'))
  } catch (error) {
    return fail(`not valid JSON (${(error as Error).message})`)
  }

  if (!isMapping(doc)) return fail('not a node document (expected an object)')
  if (nestingDepth(doc, MAX_NODE_DOCUMENT_DEPTH) > MAX_NODE_DOCUMENT_DEPTH) fail(`nested deeper than ${MAX_NODE_DOCUMENT_DEPTH} levels`)
  const d = doc as Record<string, unknown>
  if (d.kind !== 'node') fail(`kind ${JSON.stringify(d.kind ?? null)} is not "node": not a node document (the repository's index, or something else, served in its place)`)
  if (d.format !== NODE_DOCUMENT_FORMAT) fail(`format ${JSON.stringify(d.format)} is not supported (this localpuppet reads node documents of format ${NODE_DOCUMENT_FORMAT})`)
  if (typeof d.node !== 'string' || !isValidNodeName(d.node)) fail(`node ${JSON.stringify(d.node)}: invalid node name`)
  if (d.node !== expect.node) fail(`node: the document of node ${JSON.stringify(d.node)}, not of ${expect.node} (another node's document served in its place)`)
  if (typeof d.repository !== 'string' || !REPOSITORY_ID.test(d.repository)) fail(`repository ${JSON.stringify(d.repository)}: expected 32 hex digits`)
  if (d.repository !== expect.repository) fail(`repository: of repository ${String(d.repository)}, not ${expect.repository} (another repository's document in its place)`)
  if (!Number.isSafeInteger(d.version) || (d.version as number) < 1) fail(`version ${JSON.stringify(d.version)}: expected an integer from 1`)
  if (!isMapping(d.input)) fail('input: not an object')
  if (!isMapping(d.layers)) fail('layers: not an object')
  if (!isMapping(d.apps)) fail('apps: not an object')
  const known = new Set(['format', 'kind', 'node', 'repository', 'version', 'expires', 'input', 'layers', 'apps'])
  const unknown = Object.keys(d).find((key) => !known.has(key))
  if (unknown !== undefined) fail(`unknown key ${JSON.stringify(unknown)}`)
  for (const [app, entry] of Object.entries(d.apps as Record<string, unknown>)) {
    if (!isMapping(entry)) fail(`apps.${app}: not an object`)
    const extra = Object.keys(entry as object).find((key) => key !== 'tags' && key !== 'channels')
    if (extra !== undefined) fail(`apps.${app}: unknown key ${JSON.stringify(extra)}`)
  }

  // The rest as an index holding this one node: every entry checked by the index's own parser (expires included).
  parseRepositoryIndex(Buffer.from(JSON.stringify(indexFromDocument(d as unknown as NodeDocument))), where)
  return d as unknown as NodeDocument
}

/** The index a fetch runs on, built from a node's document: its apps, layers and its one node. */
export function indexFromDocument(document: NodeDocument): RepositoryIndex {
  return {
    format: REPOSITORY_FORMAT,
    repository: document.repository,
    version: document.version,
    expires: document.expires,
    apps: document.apps,
    nodes: {[document.node]: document.input},
    layers: document.layers,
  }
}
