import test from 'ava'
import fc from 'fast-check'

import {type InstallRecord, recordText} from '../../../src/lib/install/install-record.js'

const record = fc.record({
  files: fc.array(fc.record({path: fc.string({minLength: 1, maxLength: 30}), size: fc.nat(), executable: fc.boolean(), sha256: fc.stringMatching(/^[0-9a-f]{64}$/)}), {maxLength: 3000}),
  dirs: fc.option(fc.array(fc.string({minLength: 1}), {minLength: 1, maxLength: 3}), {nil: undefined}),
  release: fc.string(),
  signedBy: fc.option(fc.string()),
})

test('an install record written in pieces is JSON.stringify(record) and a newline, whatever its size', (t) => {
  fc.assert(
    fc.property(record, ({files, dirs, release, signedBy}) => {
      const value: InstallRecord = {format: 1, release, digest: 'sha256:x', files, dirs, installedAt: '2026-01-01T00:00:00.000Z', source: {type: 'archive', path: '/a "b"', sha256: 'y'}, signedBy}
      const pieces = [...recordText(value)]
      t.is(pieces.join(''), JSON.stringify(value) + '\n')
      // Never the whole list in one piece: a piece is about 64 KiB at most.
      t.true(pieces.every((piece) => piece.length < 64 * 1024 + 300))
    }),
    {numRuns: 60},
  )
})
