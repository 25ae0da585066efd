import {readFile, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import {loadSigningKey} from '../../src/lib/archive/signature.js'
import {nodeDocumentPath, signNodeDocument} from '../../src/lib/repository/node-documents/document.js'

/** A node's document in a repository directory (node-documents/): its path, bytes, signature and content. */
export async function nodeDocument(repo: string, node: string): Promise<{path: string; bytes: Buffer; signature: Buffer; json: any}> {
  const {repository} = JSON.parse(await readFile(join(repo, 'index.json'), 'utf8'))
  const path = join(repo, nodeDocumentPath(repository, node))
  const bytes = await readFile(path)
  return {path, bytes, signature: await readFile(`${path}.sig`), json: JSON.parse(bytes.toString())}
}

/** Writes a node's document (bytes as given, or `json` serialised) and its signature by `key` (a PEM file): what a hostile mirror holding the key, or a replay, serves. */
export async function writeNodeDocument(repo: string, node: string, document: {json?: unknown; bytes?: Buffer; signature?: Buffer}, key?: string): Promise<void> {
  const {path} = await nodeDocument(repo, node)
  const bytes = document.bytes ?? Buffer.from(JSON.stringify(document.json))
  const signature = document.signature ?? signNodeDocument(bytes, await loadSigningKey(key!))
  await writeFile(`${path}.sig`, signature)
  await writeFile(path, bytes)
}

/**
 * Adds `count` generated nodes to a repository directory as a publish would leave them, for
 * benchmarks (issue 40: a tick and a publish at 100,000 nodes): each a copy of `like`'s index
 * entry under the name `node<i>.dc1.example.com` (its input file not written: neither a tick
 * nor a publish of another node reads it), with its signed document; with `nodesInDocuments`
 * the index lists no nodes (publish --node-documents-only), else it lists them all. The index
 * is signed again; files are written without syncing (a generated repository, not a publish).
 */
export async function addGeneratedNodes(repo: string, key: string, count: number, options: {like?: string; nodesInDocuments?: boolean} = {}): Promise<void> {
  const {mkdir} = await import('node:fs/promises')
  const {signIndex} = await import('../../src/lib/archive/signature.js')
  const {buildNodeDocument, serializeNodeDocument} = await import('../../src/lib/repository/node-documents/document.js')
  const {readNodeTable} = await import('../../src/lib/repository/node-documents/node-table.js')
  const {inputPathFor, parseRepositoryIndex, serializeRepositoryIndex} = await import('../../src/lib/repository/repository-index.js')
  const signingKey = await loadSigningKey(key)
  const index = parseRepositoryIndex(await readFile(join(repo, 'index.json')), 'index.json')
  const nodes = index.nodesInDocuments ? readNodeTable(repo, index.repository!) : {...index.nodes}
  const like = nodes[options.like ?? 'web1']
  if (like === undefined) throw new Error(`addGeneratedNodes: ${repo} has no node ${options.like ?? 'web1'} to copy`)
  const documents = join(repo, 'nodes')
  await mkdir(documents, {recursive: true})
  const generated = {...index, nodes}
  for (let i = 1; i <= count; i++) {
    const node = `node${i}.dc1.example.com`
    const sha256 = (i.toString(16).padStart(8, '0') + like.sha256).slice(0, 64)
    nodes[node] = {...like, input: inputPathFor(node, sha256), sha256}
    const bytes = serializeNodeDocument(buildNodeDocument(generated, node, Date.now(), index.expires!)!)
    const path = join(repo, nodeDocumentPath(index.repository!, node))
    await writeFile(`${path}.sig`, signNodeDocument(bytes, signingKey))
    await writeFile(path, bytes)
  }

  const written = options.nodesInDocuments ? {...index, nodes: undefined, nodesInDocuments: true as const, nodeDocuments: true as const} : {...index, nodes, nodeDocuments: true as const}
  const bytes = serializeRepositoryIndex(written)
  await writeFile(join(repo, 'index.json.sig'), signIndex(bytes, signingKey))
  await writeFile(join(repo, 'index.json'), bytes)
}
