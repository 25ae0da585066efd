import {needsEscaping, terminalText} from './terminal-text.js'

/** Quotes one word for /bin/sh: as it is when it is plain, else single quotes, with each ' written as '\''. */
export function shellQuote(word: string): string {
  if (/^[A-Za-z0-9_@%+=:,./-]+$/.test(word)) return word
  return `'${word.replaceAll("'", `'\\''`)}'`
}

/**
 * A path for a one-line message whose fix may be pasted into a shell: quoted for sh, or,
 * when it holds a control or invisible formatting character (a newline would forge a
 * second line, an escape sequence rewrite the terminal, a bidi override reorder the line),
 * as a JSON string with each of those written out (JSON alone leaves C1 and bidi characters
 * as they are), which shows every character.
 */
export function displayPath(path: string): string {
  return needsEscaping(path) ? terminalText(JSON.stringify(path), Number.POSITIVE_INFINITY) : shellQuote(path)
}
