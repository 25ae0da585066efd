import {readFileSync} from 'node:fs'
import {join} from 'node:path'

/** A parsed Puppet type expression: `Optional[Array[String[1]]]`, or a literal argument. */
export type TypeExpr =
  | {type: string; args: TypeExpr[]}
  | {literal: string | number | boolean | null}
  | {regex: string}
  | {hash: Array<[TypeExpr, TypeExpr]>}
  | {default: true}

/** Finds a type alias (`type Stdlib::Port = Integer[0, 65535]`) by name; null when there is none. */
export type AliasResolver = (name: string) => TypeExpr | null

/**
 * Parses a type expression as written in a parameter list. Returns null for anything it
 * does not understand, which then is never checked.
 */
export function parseType(text: string): TypeExpr | null {
  const parser = new Parser(text)
  try {
    const expr = parser.expr()
    parser.space()
    return parser.done() ? expr : null
  } catch {
    return null
  }
}

/**
 * Whether a value from the input (as YAML gives it: string, number, boolean, list,
 * mapping) is an instance of a Puppet type. `true` or `false` only when certain;
 * `null` when it cannot be known statically (an unresolved alias, a Ruby-only regex
 * feature, a type only Puppet's evaluator knows).
 */
export function isInstance(type: TypeExpr, value: unknown, aliases: AliasResolver, depth = 0): boolean | null {
  if (depth > 32) return null
  if (!('type' in type)) {
    if ('literal' in type && typeof type.literal === 'string') return value === type.literal
    return null
  }

  const args = type.args
  const recurse = (t: TypeExpr, v: unknown) => isInstance(t, v, aliases, depth + 1)
  const num = (i: number, fallback: number) => {
    const arg = args[i]
    return arg && 'literal' in arg && typeof arg.literal === 'number' ? arg.literal : arg === undefined || 'default' in arg ? fallback : Number.NaN
  }

  const inRange = (n: number, from: number) => {
    const min = num(from, -Infinity)
    const max = num(from + 1, Infinity)
    if (Number.isNaN(min) || Number.isNaN(max)) return null
    return n >= min && n <= max
  }

  switch (type.type) {
    case 'Any':
    case 'Data':
    case 'RichData': {
      return true
    }

    case 'Undef': {
      return value === null || value === undefined
    }

    case 'String': {
      if (typeof value !== 'string') return false
      return inRange([...value].length, 0)
    }

    case 'Integer': {
      // Integers beyond 2^53 are BigInts: Integers for Puppet; their range is checked exactly.
      if (typeof value === 'bigint') return bigInRange(value, args)
      if (typeof value !== 'number' || !Number.isInteger(value)) return false
      return inRange(value, 0)
    }

    case 'Float': {
      if (typeof value === 'bigint') return null
      if (typeof value !== 'number') return false
      // 1.0 in YAML reads as the number 1 here: whether Puppet sees a Float is not known.
      return Number.isInteger(value) ? null : inRange(value, 0)
    }

    case 'Numeric': {
      if (typeof value === 'bigint') return bigInRange(value, args)
      if (typeof value !== 'number') return false
      return inRange(value, 0)
    }

    case 'Boolean': {
      return typeof value === 'boolean'
    }

    case 'Scalar':
    case 'ScalarData': {
      return ['string', 'number', 'bigint', 'boolean'].includes(typeof value)
    }

    case 'Collection': {
      return typeof value === 'object' && value !== null ? inRange(Array.isArray(value) ? value.length : Object.keys(value).length, 0) : false
    }

    case 'Array': {
      if (!Array.isArray(value)) return false
      const hasElementType = args[0] !== undefined && 'type' in args[0]
      const size = inRange(value.length, hasElementType ? 1 : 0)
      return all([size, ...(hasElementType ? value.map((v) => recurse(args[0], v)) : [])])
    }

    case 'Hash': {
      if (value === null || typeof value !== 'object' || Array.isArray(value)) return false
      const entries = Object.entries(value)
      if (args.length >= 2 && 'type' in args[0] && 'type' in args[1]) {
        return all([inRange(entries.length, 2), ...entries.flatMap(([k, v]) => [recurse(args[0], k), recurse(args[1], v)])])
      }

      return inRange(entries.length, 0)
    }

    case 'Optional': {
      if (value === null || value === undefined) return true
      return args[0] === undefined ? true : recurse(args[0], value)
    }

    case 'NotUndef': {
      if (value === null || value === undefined) return false
      return args[0] === undefined ? true : recurse(args[0], value)
    }

    case 'Enum': {
      if (typeof value !== 'string') return false
      const caseInsensitive = args.some((arg) => 'literal' in arg && arg.literal === true)
      const options = args.flatMap((arg) => ('literal' in arg && typeof arg.literal === 'string' ? [arg.literal] : []))
      return caseInsensitive ? options.some((o) => o.toLowerCase() === value.toLowerCase()) : options.includes(value)
    }

    case 'Pattern': {
      if (typeof value !== 'string') return false
      const results = args.map((arg) => {
        const source = 'regex' in arg ? arg.regex : 'literal' in arg && typeof arg.literal === 'string' ? arg.literal : null
        const re = source === null ? null : rubyRegExp(source)
        return re === null ? null : re.test(value)
      })
      return any(results)
    }

    case 'Variant': {
      return any(args.map((arg) => recurse(arg, value)))
    }

    case 'Struct': {
      const shape = args[0]
      if (!shape || !('hash' in shape)) return null
      if (value === null || typeof value !== 'object' || Array.isArray(value)) return false
      const given = value as Record<string, unknown>
      const results: Array<boolean | null> = []
      const known = new Set<string>()
      for (const [keyExpr, valueType] of shape.hash) {
        const optional = 'type' in keyExpr && keyExpr.type === 'Optional'
        const keyLiteral = 'literal' in keyExpr ? keyExpr.literal : 'type' in keyExpr && keyExpr.args[0] && 'literal' in keyExpr.args[0] ? keyExpr.args[0].literal : undefined
        if (typeof keyLiteral !== 'string') return null
        known.add(keyLiteral)
        if (Object.hasOwn(given, keyLiteral)) results.push(recurse(valueType, given[keyLiteral]))
        else if (!optional) results.push(recurse(valueType, undefined))
      }

      if (Object.keys(given).some((key) => !known.has(key))) return false
      return all(results)
    }

    default: {
      if (!/^[A-Z]\w*(::[A-Z]\w*)+$/.test(type.type) || args.length > 0) return null
      const alias = aliases(type.type)
      return alias === null ? null : recurse(alias, value)
    }
  }
}

/** Puppet's name for the type of a value, as in "expects a Boolean value, got String". */
export function valueLabel(value: unknown): string {
  if (value === null || value === undefined) return 'Undef'
  if (typeof value === 'string') return 'String'
  if (typeof value === 'boolean') return 'Boolean'
  if (typeof value === 'bigint') return 'Integer'
  if (typeof value === 'number') return Number.isInteger(value) ? 'Integer' : 'Float'
  return Array.isArray(value) ? 'Array' : 'Hash'
}

/**
 * Type aliases of a modulepath, loaded the way Puppet's loader finds them:
 * `Foo::Bar::Baz` only in `foo/types/bar/baz.pp` of module foo.
 */
export function aliasResolver(modules: Map<string, string>): AliasResolver {
  const cache = new Map<string, TypeExpr | null>()
  return (name) => {
    if (cache.has(name)) return cache.get(name)!
    cache.set(name, null)
    const [module, ...rest] = name.toLowerCase().split('::')
    const dir = modules.get(module)
    let found: TypeExpr | null = null
    if (dir && rest.length > 0) {
      try {
        const text = readFileSync(join(dir, 'types', ...rest.slice(0, -1), `${rest.at(-1)}.pp`), 'utf8')
        const match = /^\s*type\s+([A-Z][\w:]*)\s*=\s*([\s\S]*)$/m.exec(text.replace(/^\s*#.*$/gm, ''))
        if (match && match[1].toLowerCase() === name.toLowerCase()) found = parseType(match[2].trim())
      } catch {
        // No such type file, unreadable, or an alias we cannot parse: unresolved (null), as an unknown type is.
      }
    }

    cache.set(name, found)
    return found
  }
}

/** A BigInt against Integer[min, max]: exact for integer bounds, unknown for others. */
function bigInRange(value: bigint, args: TypeExpr[]): boolean | null {
  const bound = (arg: TypeExpr | undefined): bigint | undefined | null => {
    if (arg === undefined || 'default' in arg) return undefined
    return 'literal' in arg && typeof arg.literal === 'number' && Number.isSafeInteger(arg.literal) ? BigInt(arg.literal) : null
  }

  const [min, max] = [bound(args[0]), bound(args[1])]
  if (min === null || max === null) return null
  return (min === undefined || value >= min) && (max === undefined || value <= max)
}

function all(results: Array<boolean | null>): boolean | null {
  if (results.includes(false)) return false
  return results.includes(null) ? null : true
}

function any(results: Array<boolean | null>): boolean | null {
  if (results.includes(true)) return true
  return results.includes(null) ? null : false
}

/**
 * A Ruby regular expression (as Puppet's Pattern uses it) as a JavaScript one, or null
 * when it uses something the two do not share. In Ruby `^` and `$` match at every line.
 */
function rubyRegExp(source: string): RegExp | null {
  if (/\(\?[<]?[a-z]*-?[a-z]*[):]|\\[hHRXGKpP]|\(\?>|[*+?}]\+|\[\[:|\\z|\\Z|\\A/.test(source.replaceAll('\\\\', ''))) {
    // Translate the common anchors; refuse the rest.
    const translated = source.replaceAll(/\\A/g, '(?<![\\s\\S])').replaceAll(/\\z/g, '(?![\\s\\S])').replaceAll(/\\Z/g, '(?=\\n?(?![\\s\\S]))')
    if (/\(\?[<]?[a-z]*-?[a-z]*[):]|\\[hHRXGKpP]|\(\?>|[*+?}]\+|\[\[:/.test(translated.replaceAll('(?<![\\s\\S])', '').replaceAll('\\\\', ''))) return null
    source = translated
  }

  try {
    return new RegExp(source, 'mu')
  } catch {
    return null
  }
}

class Parser {
  private i = 0
  constructor(private readonly text: string) {}

  done(): boolean {
    return this.i >= this.text.length
  }

  space(): void {
    while (this.i < this.text.length && /\s/.test(this.text[this.i])) this.i++
  }

  expr(): TypeExpr {
    this.space()
    const rest = this.text.slice(this.i)
    let match: RegExpExecArray | null
    if ((match = /^(?:::)?[A-Z]\w*(?:::[A-Z]\w*)*/.exec(rest))) {
      this.i += match[0].length
      const args: TypeExpr[] = []
      this.space()
      if (this.text[this.i] === '[') {
        this.i++
        for (;;) {
          this.space()
          if (this.text[this.i] === ']') break
          args.push(this.expr())
          this.space()
          if (this.text[this.i] === ',') this.i++
          else if (this.text[this.i] !== ']') throw new Error('expected , or ]')
        }

        this.i++
      }

      return {type: match[0].replace(/^::/, ''), args}
    }

    if ((match = /^-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?/.exec(rest))) {
      this.i += match[0].length
      return {literal: Number(match[0])}
    }

    if ((match = /^'((?:[^'\\]|\\.)*)'/.exec(rest))) {
      this.i += match[0].length
      return {literal: match[1].replaceAll(/\\(['\\])/g, '$1')}
    }

    if ((match = /^"((?:[^"\\$]|\\.)*)"/.exec(rest))) {
      this.i += match[0].length
      return {literal: match[1].replaceAll(/\\(["\\$])/g, '$1')}
    }

    if ((match = /^\/((?:[^/\\\n]|\\.)*)\//.exec(rest))) {
      this.i += match[0].length
      return {regex: match[1].replaceAll('\\/', '/')}
    }

    if ((match = /^(default|undef|true|false)\b/.exec(rest))) {
      this.i += match[0].length
      return match[1] === 'default' ? {default: true} : {literal: match[1] === 'undef' ? null : match[1] === 'true'}
    }

    // A bare word is a string in Puppet (a Struct key: `Optional[name] => String`).
    if ((match = /^[a-z_][\w]*(?![\w:$])/.exec(rest))) {
      this.i += match[0].length
      return {literal: match[0]}
    }

    if (rest.startsWith('{')) {
      this.i++
      const hash: Array<[TypeExpr, TypeExpr]> = []
      for (;;) {
        this.space()
        if (this.text[this.i] === '}') break
        const key = this.expr()
        this.space()
        if (!this.text.startsWith('=>', this.i)) throw new Error('expected =>')
        this.i += 2
        hash.push([key, this.expr()])
        this.space()
        if (this.text[this.i] === ',') this.i++
        else if (this.text[this.i] !== '}') throw new Error('expected , or }')
      }

      this.i++
      return {hash}
    }

    throw new Error(`unexpected ${rest.slice(0, 10)}`)
  }
}
