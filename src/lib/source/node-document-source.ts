import type {KeyObject} from 'node:crypto'

import {indexChannels} from '../repository/repository-index.js'
import type {FetchOptions, IndexRead} from './release-source.js'
import type {Transport} from './readers/reader.js'
import {RepositoryUnavailableError} from '../errors.js'
import {nodeDocumentPath} from '../repository/node-documents/document.js'
import {documentParser, readNodeDocument} from './read-node-document.js'

/** What a repository source lends the document's reading: its transport, its name, the node, and its trust rules (keys, untrusted places). */
export interface DocumentContext {
  transport: Transport
  label: string
  node: string
  keys: (options: FetchOptions) => Promise<{keys: KeyObject[]; untrusted: string[]}>
}

/**
 * The replay track of a node's documents from a source, in repositories.json:
 * `<source>#node:<name>`, one per node name (a module directory read as several nodes, e.g.
 * `enc --fetch` for another, keeps each one's versions apart).
 */
export function documentTrack(sourceKey: string, node: string): string {
  return `${sourceKey}#node:${node}`
}

/**
 * A node's fetch through its own document: the repository id it knows (`repository`, else
 * --accept-repository, the repository_id setting, the id pinned for the source's index, the
 * id pinned for its documents), the document read (conditionally, kept as the index is) and
 * verified, then judged as an index is against the node's own track `<source>#node:<name>`: a
 * version older than one accepted is a replay, an expired one refused (65), the repository id
 * the one pinned. Null when no id is known yet (the index comes first) or the repository has
 * no document for the node (404): the caller reads index.json as before.
 */
export async function readViaDocument(context: DocumentContext, options: FetchOptions, repository: string | null): Promise<(IndexRead & {track: string; unchanged: boolean}) | null> {
  const [{acceptIndex, acceptedVersionsPath, readAcceptedVersions, repositoryKey}, {keepIndex, usableKeptIndex}] = await Promise.all([import('./accepted-versions.js'), import('../conditional/kept-index.js')])
  const key = repositoryKey(context.label)
  const track = documentTrack(key, context.node)
  const memory = await readAcceptedVersions(options.moduleDir, options.allowUntrusted).then(
    ({memory}) => memory,
    () => null,
  )
  const id = repository ?? options.acceptRepository ?? options.expectedRepository?.id ?? memory?.repositories[key]?.repository ?? memory?.repositories[track]?.repository ?? null
  if (id === null) return null
  const {keys, untrusted} = await context.keys(options)
  const parse = documentParser(context.node, id)
  const kept = context.transport.readConditional && memory !== null ? await usableKeptIndex(options.moduleDir, track, memory.repositories[track], parse) : null
  const read = await readNodeDocument(context.transport, context.node, id, keys, kept)
  if (read === null) {
    // Once documents came from this repository, their absence is no reason to go back to the index: withholding them would replay an older one.
    const before = memory?.repositories[track]
    if (before?.version != null && before.repository === id) {
      // Unavailable (69), as a repository out of reach is: apply --fetch keeps enforcing what the node has, taking nothing new.
      throw new RepositoryUnavailableError(
        `node ${context.node}'s document ${context.transport.locate(nodeDocumentPath(id, context.node))} is not found, though this node accepted its document version ${before.version} from ${context.label}: most likely its input was removed from the repository (publish --prune), or the repository is being published or copied and is incomplete, or someone withholds the document; nothing taken from the repository's index (this node keeps what it has)`,
        [
          `a node taken out of the fleet: stop its timer (it keeps enforcing its last release until then); a node that should be in it: publish its input again (publish --node ${context.node} --input FILE); a repository published without documents on purpose: remove the ${track} entry from ${acceptedVersionsPath(options.moduleDir)}`,
        ],
      )
    }

    return null
  }

  const {index} = read
  // The id the document must have is the one its path was computed from: pinned on the track as an index's is.
  const expected = options.acceptRepository === undefined ? {id, from: options.expectedRepository?.from ?? `the repository this node accepted from ${context.label}`} : undefined
  const accepted = await acceptIndex(options.moduleDir, track, index, {allowUntrusted: options.allowUntrusted, channels: indexChannels(index), acceptRepository: options.acceptRepository, expectedRepository: expected})
  if (read.fresh) await keepIndex(options.moduleDir, track, read.fresh)
  return {index, signedBy: read.signedBy, accepted, untrusted: [...untrusted, ...accepted.untrusted], track, unchanged: read.unchanged}
}
