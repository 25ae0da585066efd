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
  const scopes: Array<{name: string | null; depth: number}> = []
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
      scopes.push({name: pendingScope, depth})
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

    const word = /^[A-Za-z_][\w:]*/.exec(text.slice(i, i + 256))
    if (word) {
      const before = i === 0 ? '' : text[i - 1]
      if ((word[0] === 'class' || word[0] === 'define') && !/[\w$:]/.test(before)) {
        const head = readHead(text, i + word[0].length)
        if (head) {
          const enclosing = scopes.filter((scope) => scope.name !== null).at(-1)?.name
          const name = enclosing && !head.name.includes('::') && word[0] === 'class' ? `${enclosing}::${head.name}` : head.name.replace(/^::/, '')
          found.push({kind: word[0], name, parameters: head.parameters, file, line: lineAt(text, i)})
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
  const close = text.indexOf(')', i)
  if (close === -1) return i
  const tag = /^@\(\s*"?([^":/)]+)"?/.exec(text.slice(i, close + 1))?.[1]?.trim()
  if (!tag) return i
  const bodyStart = text.indexOf('\n', close)
  if (bodyStart === -1) return text.length
  const end = new RegExp(`^[ \\t]*\\|?[ \\t]*-?[ \\t]*${tag.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}[ \\t]*$`, 'm')
  const rest = text.slice(bodyStart + 1)
  const match = end.exec(rest)
  return match ? bodyStart + 1 + match.index + match[0].length : text.length
}

/** After `class`/`define`: NAME, optional (PARAMS), optional `inherits X`, then `{`. */
function readHead(text: string, from: number): {name: string; parameters: PuppetParameter[]; end: number} | null {
  let i = skipSpace(text, from)
  const name = /^(?:::)?[a-z][a-z0-9_]*(?:::[a-z][a-z0-9_]*)*/.exec(text.slice(i, i + 512))
  if (!name) return null
  i = skipSpace(text, i + name[0].length)
  let parameters: PuppetParameter[] = []
  if (text[i] === '(') {
    const close = matchingParen(text, i)
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

function matchingParen(text: string, open: number): number {
  let depth = 0
  for (let i = open; i < text.length; ) {
    const skipped = skipInert(text, i, ',')
    if (skipped > i) {
      i = skipped
      continue
    }

    if ('([{'.includes(text[i])) depth++
    else if (')]}'.includes(text[i]) && --depth === 0) return i
    i++
  }

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

function lineAt(text: string, index: number): number {
  let line = 1
  for (let i = 0; i < index; i++) if (text.charCodeAt(i) === 10) line++
  return line
}
