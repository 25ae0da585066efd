import {readFile, rm} from 'node:fs/promises'
import {join} from 'node:path'

import {writeSignedFileAtomic} from '../../util/atomic-write.js'
import {NODE_DOCUMENTS_DIR, nodeDocumentPath} from './document.js'

/**
 * `nodes/.unfinished`: the documents (their file names, hashes: no node is named) an index
 * update is writing, recorded before the first of them and removed once index.json is
 * written. Documents go before the index (a node never reads a document naming an input not
 * yet there), so a publish that fails or is killed in between has published documents the
 * index does not say; the next update finds them here and writes them again as its index says.
 */
const UNFINISHED = join(NODE_DOCUMENTS_DIR, '.unfinished')
const NAME = /^[0-9a-f]{64}\.json$/

const fileName = (repository: string, node: string) => nodeDocumentPath(repository, node).slice(NODE_DOCUMENTS_DIR.length + 1)

/** The document names an earlier update left unfinished (none: []); anything unreadable is none. */
async function readUnfinished(repo: string): Promise<string[]> {
  const text = await readFile(join(repo, UNFINISHED), 'utf8').catch(() => '')
  return text.split('\n').filter((name) => NAME.test(name))
}

/**
 * Records the documents about to be written (with any an earlier update left unfinished), and
 * returns the nodes of `nodes` (the index's, after this update) whose documents an earlier
 * update left unfinished: to be written again.
 */
export async function markUnfinished(repo: string, repository: string, writing: string[], nodes: () => string[]): Promise<string[]> {
  const before = await readUnfinished(repo)
  const left = new Set(before)
  const again = left.size === 0 ? [] : nodes().filter((node) => left.has(fileName(repository, node)))
  const names = [...new Set([...before, ...writing.map((node) => fileName(repository, node))])].sort()
  if (names.length > 0) await writeSignedFileAtomic(join(repo, UNFINISHED), Buffer.from(names.join('\n') + '\n'), null)
  return again
}

/** Once index.json is written: every document says what it says. */
export async function clearUnfinished(repo: string): Promise<void> {
  await rm(join(repo, UNFINISHED), {force: true})
}
