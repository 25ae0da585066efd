import type {KeyObject} from 'node:crypto'

import type {KeptIndex} from '../conditional/kept-index.js'
import type {Validators} from '../conditional/validators.js'
import {ReleaseError} from '../errors.js'
import type {RepositoryIndex} from '../repository/repository-index.js'
import type {Transport} from './readers/reader.js'
import {MAX_NODE_DOCUMENT_BYTES, type NodeDocument, indexFromDocument, nodeDocumentPath, parseNodeDocument, verifyNodeDocumentSignature} from '../repository/node-documents/document.js'

/** A node's document as read and verified, and the index a fetch runs on, built from it. */
export interface DocumentRead {
  document: NodeDocument
  index: RepositoryIndex
  signedBy: string | null
  /** Whether it was the kept copy (the server answered 304). */
  unchanged: boolean
  /** What was read, to keep once accepted (a transport that can ask conditionally); null for the kept copy. */
  fresh: {bytes: Buffer; signature: Buffer | null; validators: Validators} | null
}

/** The kept copy's bytes parsed as a fresh document is (for conditional/kept-index.ts). */
export function documentParser(node: string, repository: string): (bytes: Buffer, where: string) => RepositoryIndex {
  return (bytes, where) => indexFromDocument(parseNodeDocument(bytes, where, {node, repository}))
}

/**
 * A node's own document (`nodes/<h>.json`, repository/node-documents/document.ts) of the repository
 * `repository`, asked for conditionally with the kept copy's validators; null when the
 * repository has none (404: a repository without documents, read through index.json as
 * before). With trusted keys its signature must verify (65 otherwise), on a 304 the kept
 * bytes and signature again, with the keys trusted now. A signature over other bytes (a
 * publisher caught between its two renames) is read once more, whole. The document must be
 * this node's and this repository's (65): its version and expiry are its caller's to judge.
 */
export async function readNodeDocument(transport: Transport, node: string, repository: string, keys: KeyObject[], kept: KeptIndex | null): Promise<DocumentRead | null> {
  const path = nodeDocumentPath(repository, node)
  const where = transport.locate(path)
  for (let attempt = 0; ; attempt++) {
    const ask = attempt === 0 ? kept : null
    let bytes: Buffer
    let validators: Validators | null = null
    let signature: Buffer | null = null
    let unchanged = false
    if (transport.readConditional) {
      const answer = await transport.readConditional(path, MAX_NODE_DOCUMENT_BYTES, ask?.validators ?? null)
      if (answer === null) return null
      if (answer.status === 'unchanged') {
        if (ask === null) throw new ReleaseError(`${where}: the server answered 304 Not Modified to a request that named no copy; refused`)
        bytes = ask.bytes
        signature = ask.signature
        unchanged = true
      } else {
        bytes = answer.bytes
        validators = answer.validators
      }
    } else {
      const read = await transport.read(path, MAX_NODE_DOCUMENT_BYTES)
      if (read === null) return null
      bytes = read
    }

    let signedBy: string | null = null
    if (keys.length > 0) {
      if (!unchanged) signature = await transport.read(`${path}.sig`, 64 * 1024)
      // A copy kept while no key was trusted has no signature: asked for again, whole.
      if (signature === null && unchanged) continue
      if (signature === null) throw new ReleaseError(`${where}: not signed, and trusted keys are configured; refused`, ['publish with --sign KEY.pem'])
      try {
        signedBy = verifyNodeDocumentSignature(bytes, signature, keys, where)
      } catch (error) {
        if (attempt === 0) continue
        throw error
      }
    }

    const document = parseNodeDocument(bytes, where, {node, repository})
    return {document, index: indexFromDocument(document), signedBy, unchanged, fresh: validators ? {bytes, signature, validators} : null}
  }
}
