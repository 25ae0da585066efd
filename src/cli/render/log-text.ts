import {StringDecoder} from 'node:string_decoder'
import {Transform} from 'node:stream'

import {terminalText} from '../../lib/util/terminal-text.js'

/** A colour (Select Graphic Rendition) sequence, captured so that split keeps it. */
// eslint-disable-next-line no-control-regex
const SGR = /(\u001B\[[0-9;]{0,16}m)/u
// eslint-disable-next-line no-control-regex
const PARTIAL_SGR = /\u001B(?:\[[0-9;]{0,16})?$/u

/**
 * Puppet's output (a run's log, or streamed live by apply) as a person reads it: its lines
 * and tabs kept, and every other control or invisible formatting character shown escaped
 * (a release's `fail("\e]0;...")` reaches the output through Puppet's error line, and would
 * otherwise retitle the reader's window). Lines are not cut: the log is the whole story.
 * Puppet's own colours (SGR sequences such as `\e[0;32m`, written when a terminal watches
 * the run) are kept: they can colour text, never move the cursor, clear the screen or set
 * a title. Returns a function of each chunk in turn (a character split across two chunks
 * is kept whole); called with no chunk, it gives what is left at the end.
 */
export function terminalChunks(): (chunk?: Buffer) => string {
  const decoder = new StringDecoder('utf8')
  const part = (text: string) =>
    text
      .split(SGR)
      .map((piece, index) => (index % 2 === 1 ? piece : terminalText(piece, Number.POSITIVE_INFINITY)))
      .join('')
  const shown = (text: string) => text.split('\n').map((line) => line.split('\t').map(part).join('\t')).join('\n')
  // A colour sequence split across two chunks is held back until it is whole.
  let carry = ''
  return (chunk) => {
    let text = carry + (chunk === undefined ? decoder.end() : decoder.write(chunk))
    carry = ''
    const open = chunk === undefined ? null : PARTIAL_SGR.exec(text)
    if (open) {
      carry = open[0]
      text = text.slice(0, open.index)
    }
    return shown(text)
  }
}

/** A stream of `terminalChunks`: what `log` pipes the run's log through. */
export function terminalLines(): Transform {
  const next = terminalChunks()
  return new Transform({
    transform(chunk: Buffer, _encoding, done) {
      done(null, next(chunk))
    },
    flush(done) {
      done(null, next())
    },
  })
}
