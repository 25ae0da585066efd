import {redactUrl, terminalText} from '../../lib/util/terminal-text.js'

/** The longest message shown whole (each outside value in it is already cut at TERMINAL_TEXT_MAX where it was quoted). */
const MESSAGE_MAX = 16_000

/**
 * Any message on its way to a terminal: URLs without their credentials, and every control
 * or invisible formatting character shown escaped, so that no message, whatever built it
 * (a server's words, an archive's entry name, Puppet's or git's output), can move the
 * cursor, retitle the window or forge a second line. Names quoted by displayPath stay as
 * they are: their escapes are plain text by then.
 */
export function shownMessage(message: string): string {
  return terminalText(redactUrls(message), MESSAGE_MAX)
}

/** Each word of a text that is a URL with credentials (user info, or a `?token=`-like parameter), without them (a whole message is no URL, and `new URL` would re-encode its spaces). */
export function redactUrls(text: string): string {
  const suspect = (word: string) => word.includes('@') || word.includes('=')
  return suspect(text) ? text.split(/(\s+)/).map((word) => (suspect(word) ? redactUrl(word) : word)).join('') : text
}

