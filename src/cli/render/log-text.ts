import {StringDecoder} from 'node:string_decoder'
import {Transform} from 'node:stream'

import {terminalText} from '../../lib/util/terminal-text.js'

/**
 * Puppet's output (a run's log, or streamed live by apply) as a person reads it: its lines
 * and tabs kept, and every other control or invisible formatting character shown escaped
 * (a release's `fail("\e]0;...")` reaches the output through Puppet's error line, and would
 * otherwise retitle the reader's window). Lines are not cut: the log is the whole story.
 * Returns a function of each chunk in turn (a character split across two chunks is kept
 * whole); called with no chunk, it gives what is left at the end.
 */
export function terminalChunks(): (chunk?: Buffer) => string {
  const decoder = new StringDecoder('utf8')
  const shown = (text: string) => text.split('\n').map((line) => line.split('\t').map((part) => terminalText(part, Number.POSITIVE_INFINITY)).join('\t')).join('\n')
  return (chunk) => shown(chunk === undefined ? decoder.end() : decoder.write(chunk))
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
