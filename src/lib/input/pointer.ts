import {readFile} from 'node:fs/promises'

import {MAX_YAML_BYTES, parseYaml} from '../yaml.js'

/** The node's release pointer: the input file's `app` as written, or null when the file cannot be read or has none. */
export async function readPointer(path: string): Promise<string | null> {
  try {
    const text = await readFile(path, 'utf8')
    if (text.length > MAX_YAML_BYTES) return null
    const doc = parseYaml(text, path) as Record<string, unknown> | null
    return doc && typeof doc === 'object' && typeof doc.app === 'string' ? doc.app : null
  } catch {
    return null
  }
}
