import {readdir, rm} from 'node:fs/promises'
import {join} from 'node:path'

import {NODE_DOCUMENTS_DIR, nodeDocumentPath} from './document.js'

/**
 * Removes every document under `nodes/` that is not the document of one of `nodes` (and its
 * signature): when index.json lists the nodes, it is the node table, and a document it does
 * not name is a removed node's left behind (its publisher killed between the index's rename
 * and the removal, or a publisher older than documents pruned the node): still signed,
 * still read by that node until it expires. Called after the index is written. Temporary
 * files are clearDebris's (index-update.ts), not touched here.
 */
export async function removeOrphanDocuments(repo: string, repository: string, nodes: string[]): Promise<string[]> {
  const dir = join(repo, NODE_DOCUMENTS_DIR)
  const own = new Set(nodes.map((node) => nodeDocumentPath(repository, node).slice(NODE_DOCUMENTS_DIR.length + 1)))
  const orphans = (await readdir(dir).catch(() => [] as string[])).filter((name) => /^[0-9a-f]{64}\.json(?:\.sig)?$/.test(name) && !own.has(name.replace(/\.sig$/, '')))
  for (const name of orphans) await rm(join(dir, name), {force: true})
  return orphans
}
