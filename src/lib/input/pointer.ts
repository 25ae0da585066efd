import {parseYaml} from '../yaml.js'
import {readInputText} from './read-input.js'

/**
 * The node's release pointer: the input file's `app` as written, or null when the file
 * cannot be read or has none. Read as apply reads it (a regular file, bounded: a FIFO or
 * /dev/zero cannot hang status), and null when it fails the trust rule apply would hold
 * it to: what others could write is not the node's pointer.
 */
export async function readPointer(path: string): Promise<string | null> {
  if (path === '-') return null
  try {
    const {text} = await readInputText(path, undefined, {allow: false})
    const doc = parseYaml(text, path) as Record<string, unknown> | null
    return doc && typeof doc === 'object' && typeof doc.app === 'string' ? doc.app : null
  } catch {
    return null
  }
}
