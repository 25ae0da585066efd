import test from 'ava'
import fc from 'fast-check'

import {isSafeRelativePath} from '../../../src/lib/archive/release-index.js'

/** The rule as first written, segment by segment: the one-pass version must agree with it on everything. */
function reference(path: string): boolean {
  if (path.length === 0 || Buffer.byteLength(path) > 4096 || path.startsWith('/')) return false
  if (/[\u0000-\u001F\u007F]/.test(path)) return false
  return path.split('/').every((segment) => segment !== '' && segment !== '.' && segment !== '..' && Buffer.byteLength(segment) <= 255)
}

test('isSafeRelativePath: what the segment-by-segment rule says, for paths made of slashes, dots, control characters and long names', (t) => {
  const piece = fc.oneof(
    fc.constantFrom('/', '.', '..', '...', 'a', '.a', 'a.', '\n', '\u0000', '\u007F', '\u001F', ' ', 'é', '\uD83D\uDE00'),
    fc.string({minLength: 250, maxLength: 260}).map((s) => s.replaceAll('/', 'x')),
    fc.integer({min: 80, max: 130}).map((n) => 'é'.repeat(n)),
    fc.integer({min: 60, max: 66}).map((n) => '\uD83D\uDE00'.repeat(n)),
    fc.integer({min: 80, max: 90}).map((n) => '\u20AC'.repeat(n)),
    fc.string({maxLength: 8}),
  )
  fc.assert(
    fc.property(fc.array(piece, {maxLength: 12}), (pieces) => {
      const path = pieces.join('')
      return isSafeRelativePath(path) === reference(path)
    }),
    {numRuns: 20_000},
  )
  for (const path of ['a', 'a/b', 'a/.b/c', 'a/.../b', 'x'.repeat(255), `a/${'x'.repeat(255)}/b`, 'é'.repeat(127), `a/${'\u20AC'.repeat(85)}`, '\uD83D\uDE00'.repeat(63)]) {
    t.true(isSafeRelativePath(path), path)
  }

  // Bytes, not UTF-16 code units: each of these is at most 255 code units long.
  const long = ['é'.repeat(128), 'é'.repeat(200), `a/${'\u20AC'.repeat(86)}/b`, '\uD83D\uDE00'.repeat(64), `${'é/'.repeat(1365)}éé`]
  for (const path of ['', '/a', 'a/', 'a//b', '.', '..', './a', 'a/..', 'a/./b', 'a\nb', 'x'.repeat(256), `a/${'x'.repeat(256)}`, 'a/'.repeat(2049), ...long]) {
    t.false(isSafeRelativePath(path), JSON.stringify(path.slice(0, 20)))
  }
})
