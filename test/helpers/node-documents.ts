import {readFile, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import {loadSigningKey} from '../../src/lib/archive/signature.js'
import {nodeDocumentPath, signNodeDocument} from '../../src/lib/node-documents/document.js'

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
