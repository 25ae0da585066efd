import {readdir} from 'node:fs/promises'

import {UsageError} from '../errors.js'
import {terminalText} from '../util/terminal-text.js'
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

/**
 * Refuses (64, before anything is written) a prune of a node whose input DIR seems to hold
 * under a name publish does not read (`web2.yml`, `web2.YAML`): only NAME.yaml is a node's
 * input, so a file renamed to the other spelling would cost its node its input. A `dir` that
 * cannot be listed (a label in tests) checks nothing: nodeInputsIn has listed it already.
 */
export async function assertNoStrayInputs(dir: string, pruned: string[]): Promise<void> {
  if (pruned.length === 0) return
  const names = await readdir(dir).catch(() => [] as string[])
  const strays = pruned.flatMap((node) => {
    const name = names.find((entry) => /\.ya?ml$/i.test(entry) && entry !== `${node}.yaml` && entry.replace(/\.ya?ml$/i, '').toLowerCase() === node)
    return name === undefined ? [] : [`node ${node} (DIR has ${terminalText(name)})`]
  })
  if (strays.length > 0) {
    throw new UsageError(`--prune would remove the input of ${strays.join(' and of ')}, while only NAME.yaml is read in ${terminalText(dir)}: nothing published`, [
      'rename the file to NAME.yaml (lowercase), or remove it to prune that node',
    ])
  }
}
