import {mkdir, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import test from 'ava'
import fc from 'fast-check'

import {type InstallRecord, readRecordFields, readRecordHead, recordPath, recordText} from '../../../src/lib/install/install-record.js'
import {tempDir} from '../../helpers/temp.js'

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

test("a record's head (its digest) is read without its file list: a record cut short after the digest still gives it, and the whole record is then refused as damaged", async (t) => {
  const dir = await tempDir(t)
  const release = 'foo/tags/1.0.0'
  const files = Array.from({length: 5000}, (_, i) => ({path: `foo/files/f${i}.txt`, size: i, executable: false, sha256: 'a'.repeat(64)}))
  const value: InstallRecord = {format: 1, release, digest: 'sha256:d', files, installedAt: '2026-01-01T00:00:00.000Z', source: {type: 'archive', path: '/a', sha256: 'y'}, signedBy: null}
  await mkdir(join(dir, '.localpuppet/records/foo/tags'), {recursive: true})
  const text = [...recordText(value)].join('')
  await writeFile(recordPath(dir, release), text.slice(0, text.length / 2))
  t.like(readRecordHead(dir, release), {format: 1, release, digest: 'sha256:d'})
  t.throws(() => readRecordFields(dir, release), {message: /is damaged/})
  t.is(readRecordHead(dir, 'bar/tags/1.0.0'), null)
})
