import test from 'ava'
import fc from 'fast-check'
import {Header} from 'tar'

import {ustarHeader} from '../../../src/lib/archive/tar-writer.js'

/** node-tar's header for what pack writes, or null when it needs a pax header. */
function nodeTar(path: string, size: number, mode: number, type: 'File' | 'Directory'): Buffer | null {
  const header = new Header({path, mode, size, type})
  return header.encode() ? null : header.block!
}

test("pack's own ustar header is byte for byte what node-tar writes (the tar stream is node-tar's)", (t) => {
  fc.assert(
    fc.property(
      fc.string({unit: fc.integer({min: 0x20, max: 0x7e}).map((c) => String.fromCharCode(c)), maxLength: 120}),
      fc.oneof(fc.constantFrom(0, 1, 511, 512, 0o7777777, 0o77777777777, 0o77777777777 + 1), fc.nat()),
      fc.constantFrom([0o644, 'File'] as const, [0o755, 'File'] as const, [0o755, 'Directory'] as const),
      (path, size, [mode, type]) => {
        const mine = ustarHeader(path, size, mode, type)
        const theirs = nodeTar(path, size, mode, type)
        // Where ours declines, node-tar writes the header (and any pax header) itself.
        if (mine !== null) t.deepEqual(mine, theirs)
      },
    ),
    {numRuns: 3000},
  )
})

test('the common paths take the fast way: short ASCII paths, ordinary sizes', (t) => {
  t.not(ustarHeader('foo/tags/1.0.0/foo/manifests/init.pp', 1234, 0o644, 'File'), null)
  t.is(ustarHeader('é', 1, 0o644, 'File'), null)
  t.is(ustarHeader('x'.repeat(100), 1, 0o644, 'File'), null)
})
