/*
 * Text from outside made safe for a terminal, in one place. Whatever a server, a node,
 * Puppet or a file said (a label value, a node name, a disable message, Puppet's first
 * error line, a server's error text, a URL) passes `terminalText` before it reaches a
 * table or a message: an escape sequence would set the window title or clear the screen,
 * a newline would forge a line of our own output. `--json` keeps the exact value; only
 * what a person reads is escaped. URLs lose their credentials everywhere, JSON included.
 */

// C0 controls, DEL, C1 controls (Cc), and the Unicode characters that reorder or hide
// text: every format character (Cf: bidirectional marks, overrides and isolates, the Arabic
// letter mark U+061C among them; zero-width joiners, the soft hyphen, the BOM, tag
// characters U+E0000-E007F, interlinear annotations), line and paragraph separators (Zl,
// Zp), and U+2065 (unassigned, amid the invisible operators): each is shown escaped.
const UNSAFE = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\u2065]/gu

/** The longest a single outside value is shown (the rest is cut with an ellipsis). */
export const TERMINAL_TEXT_MAX = 2_000

const NAMED: Record<string, string> = {'\n': '\\n', '\r': '\\r', '\t': '\\t', '\u001B': '\\e'}

/**
 * One value from outside as one printable line: control and invisible formatting
 * characters shown escaped (`\n`, `\e`, `\u200e`), cut at `max` characters. Text that
 * holds none of these comes back unchanged. (A literal backslash stays as it is: it can
 * make text look escaped, never move the cursor or start a line.)
 */
export function terminalText(value: unknown, max = TERMINAL_TEXT_MAX): string {
  let text = typeof value === 'string' ? value : value === null || value === undefined ? '' : String(value)
  if (text.length > max) text = `${cutAt(text, max)}…`
  UNSAFE.lastIndex = 0
  if (!UNSAFE.test(text)) return text
  return text.replace(UNSAFE, (char) => NAMED[char] ?? escapeCodePoint(char.codePointAt(0)!))
}

/** The first `max` UTF-16 units, one fewer when the cut would split a surrogate pair (an emoji keeps both halves or neither). */
function cutAt(text: string, max: number): string {
  const last = text.charCodeAt(max - 1)
  return text.slice(0, last >= 0xd800 && last <= 0xdbff ? max - 1 : max)
}

/** `\u061c`, or beyond the BMP `\u{e0041}` (`\ue0041` would read as U+E004 and a 1). */
function escapeCodePoint(code: number): string {
  return code > 0xffff ? `\\u{${code.toString(16)}}` : `\\u${code.toString(16).padStart(4, '0')}`
}

/** True when `terminalText` would change the value (it holds a control or formatting character). */
export function needsEscaping(value: string): boolean {
  UNSAFE.lastIndex = 0
  return UNSAFE.test(value)
}

/**
 * A URL without its credentials: `http://user:pass@host/x` becomes `http://host/x`, and the
 * value of a credential-like query or fragment parameter (`?token=`, `access_token`,
 * `password`, `api_key`, `X-Amz-Signature`, ... see CREDENTIAL_PARAMETER) becomes
 * `redacted`. Used wherever a URL is printed, logged or written to JSON. Text that is not a
 * URL is returned with anything that looks like `scheme://user:pass@` or `?token=...` cut
 * the same way.
 */
export function redactUrl(url: string): string {
  return redactParameters(redactUserInfo(url))
}

function redactUserInfo(url: string): string {
  try {
    const parsed = new URL(url)
    if (parsed.username === '' && parsed.password === '') return url
    parsed.username = ''
    parsed.password = ''
    return parsed.toString()
  } catch {
    // Not a URL as a whole: cut credentials wherever a scheme://user@ pattern appears, up to
    // the last @ before a space (a password that is not a URL's may hold a / or an @).
    return url.replace(/([a-z][a-z0-9+.-]*:\/\/)\S*@/giu, '$1')
  }
}

/**
 * A query or fragment parameter whose value is a credential, by its name (case-insensitive):
 * anything ending in token, secret, password/passwd, apikey, signature or credential
 * (access_token, client_secret, X-Amz-Signature, X-Amz-Credential, X-Amz-Security-Token),
 * and the short names key, pass, pwd, auth, authorization, sig, session on their own or after
 * a `_`, `-` or `.` (api_key, api-key, x-auth, but not monkey).
 */
const CREDENTIAL_PARAMETER = /(?:token|secret|passw(?:or)?d|apikey|signature|credential|(?:^|[_.-])(?:key|pass|pwd|auth|authorization|sig|session))$/iu

/** Each `name=value` after a `?`, `&`, `;` or `#` whose name is a credential's, with its value replaced (the rest of the text exactly as it was: no re-encoding). */
function redactParameters(text: string): string {
  if (!/[?#]/u.test(text)) return text
  return text.replace(/([?&;#])([^=&;#?\s"'<>]+)=([^&;#\s"'<>]*)/gu, (whole, separator: string, name: string, value: string) =>
    value !== '' && CREDENTIAL_PARAMETER.test(safeDecode(name)) ? `${separator}${name}=redacted` : whole,
  )
}

function safeDecode(name: string): string {
  try {
    return decodeURIComponent(name.replaceAll('+', ' '))
  } catch {
    return name
  }
}

/** Both: a URL from a setting or a flag, as a person reads it. */
export function terminalUrl(url: string): string {
  return terminalText(redactUrl(url))
}
