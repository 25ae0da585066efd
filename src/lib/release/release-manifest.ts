import {ReleaseError, describeFsError} from '../errors.js'
import {decodeUtf8Strict, readBoundedFile} from '../util/bounded-read.js'
import {closest} from '../util/did-you-mean.js'
import {MAX_YAML_BYTES, lineOfKey, parseYaml} from '../yaml.js'

export const MANIFEST_FILE = 'manifest.yaml'

/** One `modulepath:` entry as written, with where it was written for messages. */
export interface ManifestEntry {
  text: string
  /** `foo/tags/1.4.0/manifest.yaml:3` */
  where: string
}

/**
 * Reads a release root's manifest.yaml. A release without one has no further modulepath
 * entries. `label` is how messages name the file (relative to the module directory).
 */
export async function readReleaseManifest(path: string, label: string): Promise<ManifestEntry[]> {
  const refuse = (message: string) => new ReleaseError(message)
  let bytes: Buffer
  try {
    // A FIFO or device as manifest.yaml is refused at once, never waited on.
    bytes = await readBoundedFile(path, {maxBytes: MAX_YAML_BYTES, label, error: refuse})
  } catch (error) {
    if (error instanceof ReleaseError) throw error
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return []
    throw describeFsError(error, label)
  }

  return parseReleaseManifest(decodeUtf8Strict(bytes, label, refuse), label)
}

/** Parses manifest.yaml text: a mapping whose only key is `modulepath`, a list of references. */
export function parseReleaseManifest(text: string, label: string): ManifestEntry[] {
  let doc: unknown
  try {
    doc = parseYaml(text, label)
  } catch (error) {
    throw new ReleaseError((error as Error).message)
  }

  if (doc === null || doc === undefined) return []
  if (typeof doc !== 'object' || Array.isArray(doc)) throw new ReleaseError(`${label}: expected a mapping with a modulepath list`)
  for (const key of Object.keys(doc)) {
    if (key !== 'modulepath') {
      const guess = closest(key, ['modulepath'])
      throw new ReleaseError(`${label}: unknown key ${JSON.stringify(key)}${guess ? ' (did you mean modulepath?)' : ''}; allowed: modulepath`)
    }
  }

  const list = (doc as {modulepath?: unknown}).modulepath
  if (list === null || list === undefined) return []
  const start = lineOfKey(text, ['modulepath'])
  if (!Array.isArray(list)) throw new ReleaseError(`${label}${start ? `:${start}` : ''}: modulepath must be a list of release references`)
  const lines = text.split(/\r?\n/)
  return list.map((entry, index) => {
    const line = start === undefined ? undefined : findItemLine(lines, start, entry)
    return {text: entry as string, where: `${label}${line ? `:${line}` : ''}: modulepath[${index}]`}
  })
}

function findItemLine(lines: string[], from: number, entry: unknown): number | undefined {
  if (typeof entry !== 'string') return undefined
  for (let i = from; i < lines.length; i++) {
    const item = lines[i].trim().replace(/^-\s*/, '').replace(/^(['"])(.*)\1$/, '$2')
    if (item === entry.trim()) return i + 1
  }

  return undefined
}
