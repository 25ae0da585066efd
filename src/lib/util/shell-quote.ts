/** Quotes one word for /bin/sh: as it is when it is plain, else single quotes, with each ' written as '\''. */
export function shellQuote(word: string): string {
  if (/^[A-Za-z0-9_@%+=:,./-]+$/.test(word)) return word
  return `'${word.replaceAll("'", `'\\''`)}'`
}

/**
 * A path for a one-line message whose fix may be pasted into a shell: quoted for sh, or,
 * when it holds a control character (a newline would forge a second line, an escape
 * sequence rewrite the terminal), as a JSON string, which shows every character.
 */
export function displayPath(path: string): string {
  // eslint-disable-next-line no-control-regex
  return /[\u0000-\u001F\u007F-\u009F]/.test(path) ? JSON.stringify(path) : shellQuote(path)
}
