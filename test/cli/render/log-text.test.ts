import test from 'ava'
import fc from 'fast-check'

import {terminalChunks} from '../../../src/cli/render/log-text.js'

const show = (chunks: string[]) => {
  const next = terminalChunks()
  return chunks.map((chunk) => next(Buffer.from(chunk))).join('') + next()
}

test("Puppet's colours reach the terminal; a title, a screen clear or a bell do not", (t) => {
  t.is(show(['\u001B[0;32mNotice: Applied catalog\u001B[0m\n']), '\u001B[0;32mNotice: Applied catalog\u001B[0m\n')
  t.is(show(['\u001B[1;31mError: \u001B]0;owned\u0007\u001B[2J\u001B[0m\n']), '\u001B[1;31mError: \\e]0;owned\\u0007\\e[2J\u001B[0m\n')
  t.is(show(['a\tb\n']), 'a\tb\n')
})

test('a colour split across chunks is kept whole; anything else split is escaped', (t) => {
  t.is(show(['x\u001B[0;3', '2my\n']), 'x\u001B[0;32my\n')
  t.is(show(['x\u001B', '[0m\n']), 'x\u001B[0m\n')
  t.is(show(['x\u001B', ']0;t\u0007']), 'x\\e]0;t\\u0007')
  t.is(show(['x\u001B[2']), 'x\\e[2')
})

test('only colour sequences survive, however the output is cut into chunks (property)', (t) => {
  const pieces = fc.constantFrom('\u001B[0;32m', '\u001B[0m', '\u001B]0;t\u0007', '\u001B[2J', '\u001B[H', '\n', '\t', 'Notice: x', '\u0007', '\u202E', 'é')
  fc.assert(
    fc.property(fc.array(pieces, {maxLength: 30}), fc.array(fc.nat(200), {maxLength: 5}), (parts, cuts) => {
      const text = parts.join('')
      const bytes = Buffer.from(text)
      const points = [...new Set(cuts.map((cut) => cut % (bytes.length + 1)))].sort((a, b) => a - b)
      const chunks: Buffer[] = []
      let from = 0
      for (const point of points) {
        chunks.push(bytes.subarray(from, point))
        from = point
      }
      chunks.push(bytes.subarray(from))
      const next = terminalChunks()
      const shown = chunks.map((chunk) => next(chunk)).join('') + next()
      // eslint-disable-next-line no-control-regex
      const left = shown.replaceAll(/\u001B\[[0-9;]*m/gu, '')
      // eslint-disable-next-line no-control-regex
      return !/[\u0000-\u0008\u000B-\u001F\u007F-\u009F\u202E]/u.test(left) && shown.split('\n').length === text.split('\n').length
    }),
  )
  t.pass()
})
