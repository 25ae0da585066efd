/** A class or defined type as declared in a manifest. */
export interface PuppetDefinition {
  kind: 'class' | 'define'
  /** Fully qualified: a class nested in `foo` is `foo::bar`. */
  name: string
  parameters: PuppetParameter[]
  /** The path as given to scanManifest. */
  file: string
  line: number
}

export interface PuppetParameter {
  name: string
  /** The type expression as written (`Optional[String]`), or null. */
  type: string | null
  /** The default value expression as written, or null when the parameter is required. */
  default: string | null
}

/**
 * Finds the classes and defined types a Puppet manifest declares, with their parameters,
 * without running Puppet: a scanner that skips strings, comments, heredocs and regular
 * expressions, tracks braces, and reads `class NAME (PARAMS) inherits X {` and
 * `define NAME (PARAMS) {`. Resource-like `class { 'x': }` declarations are not
 * definitions and are passed over. Syntax errors are Puppet's to report (parser validate).
 */
export function scanManifest(text: string, file: string): PuppetDefinition[] {
  const found: PuppetDefinition[] = []
  // Each open brace, with the innermost class or define it is in (or null): found in O(1), not by a walk of the stack.
  const scopes: Array<{enclosing: string | null; depth: number}> = []
  const lineAt = lineCounter(text)
  const parens = new Map<number, number>()
  let depth = 0
  let i = 0
  let pendingScope: string | null = null
  let lastSignificant = ''

  while (i < text.length) {
    const c = text[i]
    const skipped = skipInert(text, i, lastSignificant)
    if (skipped > i) {
      i = skipped
      continue
    }

    if (c === '{') {
      depth++
      scopes.push({enclosing: pendingScope ?? scopes.at(-1)?.enclosing ?? null, depth})
      pendingScope = null
      lastSignificant = c
      i++
      continue
    }

    if (c === '}') {
      if (scopes.length > 0 && scopes.at(-1)!.depth === depth) scopes.pop()
      depth = Math.max(0, depth - 1)
      lastSignificant = c
      i++
      continue
    }

    WORD.lastIndex = i
    const word = WORD.exec(text)
    if (word) {
      const before = i === 0 ? '' : text[i - 1]
      if ((word[0] === 'class' || word[0] === 'define') && !/[\w$:]/.test(before)) {
        const head = readHead(text, i + word[0].length, parens)
        if (head) {
          const enclosing = scopes.at(-1)?.enclosing
          const name = enclosing && !head.name.includes('::') && word[0] === 'class' ? `${enclosing}::${head.name}` : head.name.replace(/^::/, '')
          found.push({kind: word[0], name, parameters: head.parameters, file, line: lineAt(i)})
          pendingScope = name
          i = head.end
          continue
        }
      }

      lastSignificant = word[0]
      i += word[0].length
      continue
    }

    if (!/\s/.test(c)) lastSignificant = c
    i++
  }

  return found
}

const WORD = /[A-Za-z_][\w:]*/y

/** Past a string, comment, heredoc or regex starting at i; i itself when none starts there. */
function skipInert(text: string, i: number, lastSignificant: string): number {
  const c = text[i]
  if (c === '#') {
    const end = text.indexOf('\n', i)
    return end === -1 ? text.length : end
  }

  if (c === '/' && text[i + 1] === '*') {
    const end = text.indexOf('*/', i + 2)
    return end === -1 ? text.length : end + 2
  }

  if (c === '"' || c === "'") return skipQuoted(text, i)
  if (c === '@' && text[i + 1] === '(') return skipHeredoc(text, i)
  // A regex follows a match operator, `node`, or a `case` option's start.
  if (c === '/' && /^(=~|!~|node|,|\(|\[|\{|:|=>)$/.test(lastSignificant.trim() === '' ? '' : lastSignificant) && lastSignificant !== '') {
    const match = /^\/(?:\\.|[^/\\\n])*\//.exec(text.slice(i, i + 4096))
    if (match) return i + match[0].length
  }

  if ((c === '=' || c === '!') && text[i + 1] === '~') {
    const rest = /^[=!]~\s*(\/(?:\\.|[^/\\\n])*\/)?/.exec(text.slice(i, i + 4096))
    if (rest && rest[1]) return i + rest[0].length
  }

  return i
}

function skipQuoted(text: string, i: number): number {
  const quote = text[i]
  let j = i + 1
  while (j < text.length) {
    if (text[j] === '\\') j += 2
    else if (text[j] === quote) return j + 1
    else j++
  }

  return text.length
}

/** `@(TAG)` or `@("TAG":syntax/t)`: the body runs from the next line to a line `|- TAG`. */
function skipHeredoc(text: string, i: number): number {
  // The header is on its line, and short: a `@(` with no `)` does not send a search to the end of the file.
  const header = text.slice(i, i + 512)
  const close = header.search(/[)\n]/)
  if (close === -1 || header[close] !== ')') return i
  const tag = /^@\(\s*"?([^":/)]+)"?/.exec(header.slice(0, close + 1))?.[1]?.trim()
  if (!tag) return i
  const bodyStart = text.indexOf('\n', i + close)
  if (bodyStart === -1) return text.length
  // No two runs of blanks next to each other (`[ \t]*\|?[ \t]*`): a long run of blanks backtracked cubically.
  const end = new RegExp(`^[ \\t]*(?:\\|[ \\t]*)?(?:-[ \\t]*)?${tag.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}[ \\t]*$`, 'gm')
  end.lastIndex = bodyStart + 1
  const match = end.exec(text)
  return match ? match.index + match[0].length : text.length
}

/** After `class`/`define`: NAME, optional (PARAMS), optional `inherits X`, then `{`. */
function readHead(text: string, from: number, parens: Map<number, number>): {name: string; parameters: PuppetParameter[]; end: number} | null {
  let i = skipSpace(text, from)
  const name = /^(?:::)?[a-z][a-z0-9_]*(?:::[a-z][a-z0-9_]*)*/.exec(text.slice(i, i + 512))
  if (!name) return null
  i = skipSpace(text, i + name[0].length)
  let parameters: PuppetParameter[] = []
  if (text[i] === '(') {
    const close = matchingParen(text, i, parens)
    if (close === -1) return null
    parameters = parseParameters(text.slice(i + 1, close))
    i = skipSpace(text, close + 1)
  }

  const inherits = /^inherits\s+(?:::)?[a-z][\w:]*/.exec(text.slice(i, i + 512))
  if (inherits) i = skipSpace(text, i + inherits[0].length)
  return text[i] === '{' ? {name: name[0], parameters, end: i} : null
}

function skipSpace(text: string, i: number): number {
  for (;;) {
    while (i < text.length && /\s/.test(text[i])) i++
    const skipped = text[i] === '#' || (text[i] === '/' && text[i + 1] === '*') ? skipInert(text, i, '') : i
    if (skipped === i) return i
    i = skipped
  }
}

/**
 * The bracket closing the one at `open`, or -1. `known` keeps what earlier calls on the same
 * text found (the scan from a position does not depend on where it started): a group
 * already matched is stepped over, and an open bracket never closed means no bracket around
 * it closes either, so that many `class x (` left open cost one scan of the file, not one each.
 */
export function matchingParen(text: string, open: number, known: Map<number, number> = new Map()): number {
  const stack: number[] = []
  for (let i = open; i < text.length; ) {
    const skipped = skipInert(text, i, ',')
    if (skipped > i) {
      i = skipped
      continue
    }

    const c = text[i]
    if ('([{'.includes(c)) {
      const close = known.get(i)
      if (close === -1) {
        for (const unclosed of stack) known.set(unclosed, -1)
        return -1
      }

      if (close !== undefined) {
        if (stack.length === 0) return close
        i = close + 1
        continue
      }

      stack.push(i)
    } else if (')]}'.includes(c)) {
      const opened = stack.pop()!
      known.set(opened, i)
      if (stack.length === 0) return i
    }

    i++
  }

  for (const unclosed of stack) known.set(unclosed, -1)
  return -1
}

/** Splits `Type $a = x, $b` at top-level commas into parameters. */
function parseParameters(list: string): PuppetParameter[] {
  const parts: string[] = []
  let depth = 0
  let start = 0
  for (let i = 0; i < list.length; ) {
    const skipped = skipInert(list, i, ',')
    if (skipped > i) {
      i = skipped
      continue
    }

    if ('([{'.includes(list[i])) depth++
    else if (')]}'.includes(list[i])) depth--
    else if (list[i] === ',' && depth === 0) {
      parts.push(list.slice(start, i))
      start = i + 1
    }

    i++
  }

  parts.push(list.slice(start))
  const parameters: PuppetParameter[] = []
  for (const raw of parts) {
    const part = stripComments(raw).trim()
    if (part === '') continue
    const match = /^([\s\S]*?)\*?\$([a-z_]\w*)\s*(?:=\s*([\s\S]*))?$/.exec(part)
    if (!match) continue
    parameters.push({name: match[2], type: match[1].trim() || null, default: match[3] === undefined ? null : match[3].trim()})
  }

  return parameters
}

function stripComments(text: string): string {
  let out = ''
  for (let i = 0; i < text.length; ) {
    if (text[i] === '#' || (text[i] === '/' && text[i + 1] === '*')) {
      i = skipInert(text, i, '')
      continue
    }

    if (text[i] === '"' || text[i] === "'") {
      const end = skipQuoted(text, i)
      out += text.slice(i, end)
      i = end
      continue
    }

    out += text[i++]
  }

  return out
}

/** The line of an index, for indexes that only grow: each newline counted once. */
function lineCounter(text: string): (index: number) => number {
  let line = 1
  let at = 0
  return (index) => {
    for (; at < index; at++) if (text.charCodeAt(at) === 10) line++
    return line
  }
}
