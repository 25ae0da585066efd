import test from 'ava'
import fc from 'fast-check'

import {compareBytes} from '../../../src/lib/tree/release-tree.js'

test('compareBytes orders strings as their UTF-8 bytes, whatever the characters', (t) => {
  const text = fc.string({unit: fc.oneof(fc.constantFrom('a', 'b', '/', '.', 'é', '\uE000', '\uFFFD', '😀', '𝄞'), fc.string({unit: 'binary', minLength: 1, maxLength: 1})), maxLength: 12})
  fc.assert(
    fc.property(text, text, (a, b) => {
      t.is(Math.sign(compareBytes(a, b)), Math.sign(Buffer.compare(Buffer.from(a), Buffer.from(b))))
    }),
    {numRuns: 20_000},
  )
})
