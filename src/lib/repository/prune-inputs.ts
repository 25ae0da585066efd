import {UsageError} from '../errors.js'
import type {RepositoryIndex} from './repository-index.js'

/**
 * `publish --inputs DIR --prune`: the nodes whose inputs the index lists and DIR does not
 * (sorted), which leave the index. A prune that would remove the input of every node the
 * index lists, when it lists more than one, is refused (64, before anything is written):
 * DIR then shares no node with the repository, which is the wrong directory or the wrong
 * --repo far more often than a whole fleet renamed at once (that is two publishes: DIR
 * without --prune, then with it). A repository of one node renamed is obviously meant.
 */
export function nodesToPrune(index: RepositoryIndex, kept: Iterable<string>, dir: string): string[] {
  const keep = new Set(kept)
  const listed = Object.keys(index.nodes ?? {})
  const pruned = listed.filter((node) => !keep.has(node)).sort()
  if (listed.length > 1 && pruned.length === listed.length) {
    throw new UsageError(`--prune would remove the input of every node the repository lists (${listed.length}; none of them is in ${dir}): nothing published`, [
      'check --inputs and --repo; to replace every node, publish DIR without --prune first, then with it',
    ])
  }

  return pruned
}

/** Removes the pruned nodes' entries from the index (their files go once the new index is written). */
export function pruneIndex(index: RepositoryIndex, pruned: string[]): void {
  for (const node of pruned) delete index.nodes![node]
}
