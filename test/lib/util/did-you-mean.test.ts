import test from 'ava'
import fc from 'fast-check'

import {closest, editDistance} from '../../../src/lib/util/did-you-mean.js'

/** The distance as a whole matrix computes it (what editDistance did before it stopped early). */
function matrixDistance(a: string, b: string): number {
  const rows = Array.from({length: a.length + 1}, (_, i) => Array.from({length: b.length + 1}, (_, j) => (i === 0 ? j : j === 0 ? i : 0)))
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      rows[i][j] = Math.min(rows[i - 1][j] + 1, rows[i][j - 1] + 1, rows[i - 1][j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1))
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) rows[i][j] = Math.min(rows[i][j], rows[i - 2][j - 2] + 1)
    }
  }

  return rows[a.length][b.length]
}

test('editDistance is the full matrix\'s distance (a swap is one edit), and with a limit the same or the limit when it is that far or further', (t) => {
  const word = fc.string({unit: fc.constantFrom('a', 'b', 'c', 'd'), maxLength: 12})
  fc.assert(
    fc.property(word, word, fc.integer({min: 1, max: 14}), (a, b, limit) => editDistance(a, b) === matrixDistance(a, b) && editDistance(a, b, limit) === Math.min(matrixDistance(a, b), limit)),
    {numRuns: 20_000},
  )
  t.is(editDistance('wbe', 'web'), 1)
  t.is(closest('nc4sit', ['nc4site', 'ntp']), 'nc4site')
  t.is(closest('greting', ['greeting', 'port']), 'greeting')
  t.is(closest('zzzzzz', ['greeting', 'port']), undefined)
})
