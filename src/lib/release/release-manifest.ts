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

/** Puppet's `strict` setting: what Puppet does about code it tolerates but deprecates. */
export const STRICT_VALUES = ['off', 'warning', 'error'] as const

/**
 * The Puppet settings that decide how a release's code compiles, as its manifest.yaml pins
 * them (`strict`, `strict_variables`); a key left out is not pinned (see language-mode.ts).
 */
export interface ManifestLanguage {
  strict?: (typeof STRICT_VALUES)[number]
  strictVariables?: boolean
}

/** What a release's manifest.yaml says: its further modulepath and its language settings. */
export interface ReleaseManifest {
  entries: ManifestEntry[]
  language: ManifestLanguage
}

const KEYS = ['modulepath', 'strict', 'strict_variables']

/**
 * Reads a release root's manifest.yaml. A release without one has no further modulepath
 * entries. `label` is how messages name the file (relative to the module directory).
 */
export async function readReleaseManifest(path: string, label: string): Promise<ReleaseManifest> {
  const refuse = (message: string) => new ReleaseError(message)
  let bytes: Buffer
  try {
    // A FIFO or device as manifest.yaml is refused at once, never waited on.
    bytes = await readBoundedFile(path, {maxBytes: MAX_YAML_BYTES, label, error: refuse})
  } catch (error) {
    if (error instanceof ReleaseError) throw error
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return {entries: [], language: {}}
    throw describeFsError(error, label)
  }

  const text = decodeUtf8Strict(bytes, label, refuse)
  return {entries: parseReleaseManifest(text, label), language: parseManifestLanguage(text, label)}
}

/**
 * The language settings of manifest.yaml text (already checked by parseReleaseManifest):
 * `strict: off|warning|error`, `strict_variables: true|false`; 65 naming the file, line and key otherwise.
 */
export function parseManifestLanguage(text: string, label: string): ManifestLanguage {
  const doc = parseYaml(text, label) as Record<string, unknown> | null | undefined
  if (doc === null || doc === undefined) return {}
  const where = (key: string) => `${label}${lineOfKey(text, [key]) ? `:${lineOfKey(text, [key])}` : ''}: ${key}`
  const language: ManifestLanguage = {}
  if (doc.strict !== undefined && doc.strict !== null) {
    const value = doc.strict
    if (!(STRICT_VALUES as readonly unknown[]).includes(value)) throw new ReleaseError(`${where('strict')} must be one of ${STRICT_VALUES.join(', ')}, got ${JSON.stringify(doc.strict)}`)
    language.strict = value as ManifestLanguage['strict']
  }

  if (doc.strict_variables !== undefined && doc.strict_variables !== null) {
    if (typeof doc.strict_variables !== 'boolean') throw new ReleaseError(`${where('strict_variables')} must be true or false, got ${JSON.stringify(doc.strict_variables)}`)
    language.strictVariables = doc.strict_variables
  }

  return language
}

/** Parses manifest.yaml text: a mapping of `modulepath` (a list of references) and the language settings. */
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
    if (!KEYS.includes(key)) {
      const guess = closest(key, KEYS)
      throw new ReleaseError(`${label}: unknown key ${JSON.stringify(key)}${guess ? ` (did you mean ${guess}?)` : ''}; allowed: ${KEYS.join(', ')}`)
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
