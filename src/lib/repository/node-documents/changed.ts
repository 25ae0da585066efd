import type {RepositoryIndex} from '../repository-index.js'
import {appSection} from './document.js'

/** Which node documents an index update changes: those to write (every node's with `all`), and those to remove. */
export interface DocumentChanges {
  /** Every document is written again: a renewal (a publish that changes nothing else), another key, another repository id, the layers. */
  all: boolean
  write: string[]
  remove: string[]
}

/** JSON with every object's keys sorted: entries compare by content, whatever order they were built in. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, item: unknown) =>
    item !== null && typeof item === 'object' && !Array.isArray(item) ? Object.fromEntries(Object.keys(item).sort().map((key) => [key, (item as Record<string, unknown>)[key]])) : item,
  )
}

/**
 * The documents an index update changes, found without building any document: a node whose
 * entry changed, was added or removed; every node whose app reference now resolves to other
 * tags, channels or yanks (compared once per distinct reference, not per node); every node when
 * `all` is asked (a renewal, another signing key) or the repository id or the layers changed
 * (every document carries the layers). Linear in the nodes, with one comparison per distinct
 * app reference.
 */
export function changedDocuments(before: RepositoryIndex, after: RepositoryIndex, options: {all?: boolean} = {}): DocumentChanges {
  const old = before.nodes ?? {}
  const now = after.nodes ?? {}
  const remove = Object.keys(old).filter((node) => !Object.hasOwn(now, node))
  const all = options.all === true || before.repository !== after.repository || canonicalJson(before.layers ?? {}) !== canonicalJson(after.layers ?? {})
  if (all) return {all, write: Object.keys(now), remove}
  const references = new Map<string, boolean>()
  const moved = (reference: string) => {
    let changed = references.get(reference)
    if (changed === undefined) references.set(reference, (changed = canonicalJson(appSection(before, reference)) !== canonicalJson(appSection(after, reference))))
    return changed
  }

  const write = Object.keys(now).filter((node) => !Object.hasOwn(old, node) || moved(now[node].app) || canonicalJson(old[node]) !== canonicalJson(now[node]))
  return {all, write, remove}
}
