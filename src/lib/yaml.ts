import yaml from 'js-yaml'
import {LineCounter, isMap, isScalar, isSeq, parseDocument} from 'yaml'

import {InputError} from './errors.js'
import {allowBigIntInJson} from './util/json.js'
import {Secret} from './util/secret.js'

allowBigIntInJson()

/**
 * YAML 1.2 core types plus merge keys (`<<: *base`). No timestamps, binary, sets or
 * ordered maps: Puppet's ENC loader (Psych safe_load) refuses those classes, so we keep
 * such scalars as the strings they look like instead of turning them into objects.
 */
// @types/js-yaml does not declare the built-in `types`; js-yaml 4 exports them.
const TYPES = (yaml as unknown as {types: {merge: yaml.Type; int: yaml.Type}}).types

/** Integers of any size: the digits of a YAML integer, once the sign, base prefix and underscores are read. */
const BIG_INT = /^[-+]?(?:0b[01_]+|0o[0-7_]+|0x[\dA-Fa-f_]+|\d[\d_]*)$/

/**
 * js-yaml's integer, except that one beyond 2^53 becomes a BigInt instead of being
 * rounded: `9007199254740993` reaches Puppet as exactly that number.
 */
const EXACT_INT = new yaml.Type('tag:yaml.org,2002:int', {
  kind: 'scalar',
  resolve: (data: string) => TYPES.int.resolve(data) || (/^[-+]?(?:0|[1-9]\d*)$/.test(data) && data.length < 4096),
  construct: (data: string) => {
    const value = TYPES.int.construct(data) as number
    if (Number.isSafeInteger(value) || !BIG_INT.test(data)) return value
    const negative = data.startsWith('-')
    const digits = data.replace(/^[-+]/, '').replaceAll('_', '')
    const big = BigInt(digits)
    return negative ? -big : big
  },
  predicate: (object: unknown) => typeof object === 'bigint',
  represent: (object: object) => String(object),
})

/**
 * `!secret VALUE` (a string): a value the operator marked secret, read as a Secret, which
 * prints redacted everywhere and reaches Puppet as Sensitive (secrets/). Only on a scalar.
 */
const SECRET = new yaml.Type('!secret', {kind: 'scalar', construct: (data: string | null) => new Secret(data ?? ''), instanceOf: Secret})

const LOAD_SCHEMA = yaml.CORE_SCHEMA.extend({implicit: [TYPES.merge, EXACT_INT], explicit: [SECRET]})

/**
 * Plain scalars Psych (YAML 1.1, what Puppet reads the ENC output with) takes for
 * something other than a string, although js-yaml writes them unquoted: `1_000` and
 * `1,000` (integers), `2024-1-1` (a Date, which Puppet's safe_load refuses), `yEs`,
 * `NuLl`. The patterns are Psych's ScalarScanner's, slightly widened; quoting too much is
 * harmless.
 */
const PSYCH_NOT_STRING = [
  /^(?:~|null|yes|true|on|no|false|off)$/i,
  /^-?\d{4}-\d{1,2}-\d{1,2}(?:(?:[Tt]|\s+)\d{1,2}:\d\d:\d\d(?:\.\d*)?(?:\s*(?:Z|[-+]\d{1,2}:?(?:\d\d)?))?)?$/,
  /^[-+]?\.(?:inf|nan)$/i,
  /^:./,
  /^[-+]?\d[\d_]*(?::[0-5]?\d){1,2}(?:\.[\d_]*)?$/,
  /^[-+]?(?:\d[\d_,]*)?\.\d*(?:[eE][-+]\d+)?$/,
  /^[-+]?(?:0b[01_,]+|0[0-7_,]+|0|[1-9](?:\d|,\d|_\d)*|0x[\dA-Fa-f_,]+)$/,
]

/**
 * The dump schema: js-yaml's default one (it already quotes YAML 1.1 booleans and
 * timestamps), plus Psych's other lookalikes, integers of 1e21 and more written as
 * floats (`1e+21` is a string to Psych, `1.0e+21` a float), and a `<<` string tagged
 * `!!str` (Psych merges a mapping under a `<<` key even when the key is quoted).
 */
const DUMP_SCHEMA = yaml.DEFAULT_SCHEMA.extend({
  implicit: [
    new yaml.Type('tag:localpuppet,2024:psych-not-string', {kind: 'scalar', resolve: (data: string) => PSYCH_NOT_STRING.some((re) => re.test(data))}),
    // Same tag as js-yaml's int: replaces it in place.
    new yaml.Type('tag:yaml.org,2002:int', {
      kind: 'scalar',
      resolve: EXACT_INT.resolve,
      construct: EXACT_INT.construct,
      // BigInts (integers beyond 2^53) are written with all their digits.
      predicate: (object: unknown) => typeof object === 'bigint' || (TYPES.int.predicate?.(object as object) ?? false),
      represent: (object: object) => (typeof object === 'bigint' ? String(object) : String(object).replace(/^(-?\d+)e/, '$1.0e')),
    }),
  ],
  explicit: [new yaml.Type('tag:yaml.org,2002:str', {kind: 'scalar', construct: (data: string | null) => data ?? '', predicate: (object: unknown) => object === '<<'})],
})

/** Documents larger than this are refused before parsing. */
export const MAX_YAML_BYTES = 8 * 1024 * 1024
/** Nodes after aliases are expanded; stops "billion laughs" documents. */
const MAX_NODES = 200_000
/**
 * Bytes of keys and strings after aliases are expanded (plus a few per node): what the
 * ENC document and the run record would hold, so an alias bomb cannot write 200 MB files.
 */
export const MAX_EXPANDED_BYTES = 16 * 1024 * 1024

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
  return yaml.dump(value, {schema: DUMP_SCHEMA, noRefs: true, lineWidth: -1, sortKeys: false, noCompatMode: false})
}

/**
 * Walks the document as it would be written out, aliases expanded, and stops at the
 * first bound it crosses: the number of values, and their size in bytes. Iterative, one
 * entry at a time, so a list of any length is no stack overflow.
 */
function assertBounded(root: unknown, file: string): void {
  let count = 0
  let bytes = 0
  const stack: unknown[] = [root]
  while (stack.length > 0) {
    const node = stack.pop()
    count++
    if (count > MAX_NODES) throw new InputError(`${file}: too many values once aliases are expanded (over ${MAX_NODES})`)
    if (typeof node === 'string') bytes += node.length + 8
    else bytes += 8
    if (node !== null && typeof node === 'object') {
      if (Array.isArray(node)) {
        for (let i = node.length - 1; i >= 0; i--) stack.push(node[i])
      } else {
        for (const key in node as object) {
          bytes += key.length
          stack.push((node as Record<string, unknown>)[key])
        }
      }
    }

    if (bytes > MAX_EXPANDED_BYTES) throw new InputError(`${file}: too large once aliases are expanded (over ${MAX_EXPANDED_BYTES / 1024 / 1024} MiB)`)
  }
}

/**
 * The last text lineOfKey parsed, kept: its callers ask for the lines of many keys of one
 * document in a row (each problem of a node input, each key of a module's data), and parsing
 * it again for each made validating an input of n misspelt classes O(n²) (2,000 took 60 s).
 */
let lastParsed: {text: string; doc: ReturnType<typeof parseDocument>; lineCounter: LineCounter} | null = null

function parsedForLines(text: string): {doc: ReturnType<typeof parseDocument>; lineCounter: LineCounter} {
  if (lastParsed?.text !== text) {
    const lineCounter = new LineCounter()
    lastParsed = {text, lineCounter, doc: parseDocument(text, {lineCounter, uniqueKeys: false, strict: false, prettyErrors: false})}
  }

  return lastParsed
}

/**
 * Finds the 1-based line of a key, following a path of keys (`['classes', 'foo']`), in
 * block or flow style and whatever the key holds (`nova::db::mysql:`, quoted keys). In a
 * sequence, a path element names an item (`classes: [a, b]`). A document the parser
 * refuses falls back to a scan of block-style lines.
 */
export function lineOfKey(text: string, path: string[]): number | undefined {
  const {doc, lineCounter} = parsedForLines(text)
  if (doc.errors.length > 0) return lineOfKeyByScan(text, path)
  let node: unknown = doc.contents
  let line: number | undefined
  for (const key of path) {
    let at: {range?: [number, number, number] | null} | undefined
    if (isMap(node)) {
      const pair = node.items.find((item) => isScalar(item.key) && String(item.key.value) === key)
      at = pair?.key as typeof at
      node = pair?.value
    } else if (isSeq(node)) {
      at = node.items.find((item) => isScalar(item) && String(item.value) === key) as typeof at
      node = undefined
    }

    if (!at?.range) return undefined
    line = lineCounter.linePos(at.range[0]).line
  }

  return line
}

function lineOfKeyByScan(text: string, path: string[]): number | undefined {
  const lines = text.split(/\r?\n/)
  let from = 0
  let parentIndent = -1
  for (const key of path) {
    let found = -1
    // A mapping's keys share the column of its first key; deeper lines belong to their values.
    let column: number | undefined
    for (let i = from; i < lines.length; i++) {
      const line = lines[i]
      if (/^\s*(#|$)/.test(line)) continue
      const body = line.trimStart()
      const indent = line.length - body.length
      // A sequence may sit in its parent key's own column (`classes:` then `- foo`).
      if (indent < parentIndent || (indent === parentIndent && !/^-(\s|$)/.test(body))) break
      const entry = body.replace(/^(?:-\s+)+/, '')
      const keyColumn = line.length - entry.length
      column ??= keyColumn
      if (keyColumn !== column) continue
      const keyText = entry.match(/^(?:"((?:[^"\\]|\\.)*)"|'((?:[^']|'')*)'|([^:#'"][^:]*?))\s*:(?:\s|$)/)
      if (keyText && (keyText[1] ?? keyText[2]?.replaceAll("''", "'") ?? keyText[3]) === key) {
        found = i
        parentIndent = keyColumn
        break
      }
    }

    if (found === -1) return undefined
    from = found + 1
  }

  return from
}
