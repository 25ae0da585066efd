import {StringDecoder} from 'node:string_decoder'
import {Transform} from 'node:stream'

import {terminalText} from '../../lib/util/terminal-text.js'

/**
 * A run's log as a person reads it: its lines kept, and within each line every control or
 * invisible formatting character shown escaped (a release's `fail("\e]0;...")` reaches the
 * log through Puppet's error line, and would otherwise retitle the reader's window). Lines
 * are not cut: the log is the whole story. The decoder keeps a character split across two
 * chunks whole.
 */
export function terminalLines(): Transform {
  const decoder = new StringDecoder('utf8')
  const shown = (text: string) => text.split('\n').map((line) => terminalText(line, Number.POSITIVE_INFINITY)).join('\n')
  return new Transform({
    transform(chunk: Buffer, _encoding, done) {
      done(null, shown(decoder.write(chunk)))
    },
    flush(done) {
      done(null, shown(decoder.end()))
    },
  })
}
