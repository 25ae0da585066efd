import yaml from 'js-yaml'

import {InputError} from './errors.js'

/**
 * YAML 1.2 core types plus merge keys (`<<: *base`). No timestamps, binary, sets or
 * ordered maps: Puppet's ENC loader (Psych safe_load) refuses those classes, so we keep
 * such scalars as the strings they look like instead of turning them into objects.
 */
// @types/js-yaml does not declare the built-in `types`; js-yaml 4 exports them.
const LOAD_SCHEMA = yaml.CORE_SCHEMA.extend({implicit: [(yaml as unknown as {types: {merge: yaml.Type}}).types.merge]})

/** Documents larger than this are refused before parsing. */
export const MAX_YAML_BYTES = 8 * 1024 * 1024
/** Nodes after aliases are expanded; stops "billion laughs" documents. */
const MAX_NODES = 200_000

/**
 * Parses one YAML document. Syntax errors become one InputError line naming the file,
 * line and column: `input.yaml:3:5: bad indentation of a mapping entry`.
 */
export function parseYaml(text: string, file: string): unknown {
  if (Buffer.byteLength(text) > MAX_YAML_BYTES) {
    throw new InputError(`${file}: larger than ${MAX_YAML_BYTES / 1024 / 1024} MiB`)
  }

  let value: unknown
  try {
    value = yaml.load(text, {filename: file, schema: LOAD_SCHEMA, json: false})
  } catch (error) {
    if (error instanceof yaml.YAMLException) {
      const mark = error.mark as {line?: number; column?: number} | undefined
      const where = mark && typeof mark.line === 'number' ? `:${mark.line + 1}:${(mark.column ?? 0) + 1}` : ''
      throw new InputError(`${file}${where}: ${error.reason || 'invalid YAML'}`)
    }

    throw error
  }

  assertBounded(value, file)
  return value
}

/**
 * Serialises data as YAML that Puppet (Psych, YAML 1.1) reads back as the same strings,
 * numbers, booleans and nulls: strings that would read as other types in either YAML
 * version are quoted, aliases are expanded, lines are never folded.
 */
export function dumpYaml(value: unknown): string {
  return yaml.dump(value, {noRefs: true, lineWidth: -1, sortKeys: false, noCompatMode: false})
}

function assertBounded(root: unknown, file: string): void {
  let count = 0
  const stack: unknown[] = [root]
  while (stack.length > 0) {
    const node = stack.pop()
    count++
    if (count > MAX_NODES) throw new InputError(`${file}: too many values once aliases are expanded (over ${MAX_NODES})`)
    if (node !== null && typeof node === 'object') stack.push(...Object.values(node as object))
  }
}

/**
 * Finds the 1-based line of a key in block-style YAML, following a path of keys
 * (`['classes', 'foo']`). Flow-style documents return undefined: a best effort for
 * pointing at schema errors, never a parser.
 */
export function lineOfKey(text: string, path: string[]): number | undefined {
  const lines = text.split(/\r?\n/)
  let from = 0
  let parentIndent = -1
  for (const key of path) {
    let found = -1
    for (let i = from; i < lines.length; i++) {
      const line = lines[i]
      if (/^\s*(#|$)/.test(line)) continue
      const indent = line.length - line.trimStart().length
      if (indent <= parentIndent && i > from) break
      const body = line.trimStart().replace(/^-\s+/, '')
      const keyText = body.match(/^(?:"((?:[^"\\]|\\.)*)"|'((?:[^']|'')*)'|([^:#'"][^:]*?))\s*:(?:\s|$)/)
      if (keyText && (keyText[1] ?? keyText[2]?.replaceAll("''", "'") ?? keyText[3]) === key) {
        found = i
        parentIndent = indent
        break
      }
    }

    if (found === -1) return undefined
    from = found + 1
  }

  return from
}
