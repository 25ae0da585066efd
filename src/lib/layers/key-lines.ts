import {LineCounter, isMap, isScalar, isSeq, parseDocument} from 'yaml'

import {lineOfKey} from '../yaml.js'

type Entry = {line: number; value: unknown}

/**
 * The 1-based line of a key path (`['classes', 'ntp', 'servers']`; in a sequence, an
 * item's value), as yaml.ts's lineOfKey finds it, but from one parse of the document: a
 * layer asks for the line of each of its values, and parsing the text again for each would
 * make a large layer cost the square of its size. Each mapping's keys are indexed the
 * first time they are asked for. A document the parser refuses falls back to lineOfKey.
 */
export function keyLines(text: string): (path: string[]) => number | undefined {
  const lineCounter = new LineCounter()
  const doc = parseDocument(text, {lineCounter, uniqueKeys: false, strict: false, prettyErrors: false})
  if (doc.errors.length > 0) return (path) => lineOfKey(text, path)
  const indexes = new WeakMap<object, Map<string, Entry>>()
  const lineAt = (node: unknown): number | undefined => {
    const range = (node as {range?: [number, number, number] | null} | null)?.range
    return range ? lineCounter.linePos(range[0]).line : undefined
  }

  const indexOf = (node: unknown): Map<string, Entry> | undefined => {
    if (!isMap(node) && !isSeq(node)) return undefined
    let index = indexes.get(node)
    if (!index) {
      index = new Map()
      for (const item of node.items as unknown[]) {
        // The first of a repeated key, as lineOfKey finds it.
        if (isMap(node)) {
          const pair = item as {key: unknown; value: unknown}
          const line = lineAt(pair.key)
          if (isScalar(pair.key) && line !== undefined && !index.has(String(pair.key.value))) index.set(String(pair.key.value), {line, value: pair.value})
        } else {
          const line = lineAt(item)
          if (isScalar(item) && line !== undefined && !index.has(String(item.value))) index.set(String(item.value), {line, value: undefined})
        }
      }

      indexes.set(node, index)
    }

    return index
  }

  return (path) => {
    let node: unknown = doc.contents
    let line: number | undefined
    for (const key of path) {
      const entry = indexOf(node)?.get(key)
      if (!entry) return undefined
      line = entry.line
      node = entry.value
    }

    return line
  }
}
