import {closeSync, openSync, unlinkSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'

import test from 'ava'
import fc from 'fast-check'

import {IndexWriter} from '../../../src/lib/archive/index-writer.js'
import {type ReleaseIndex, serializeIndex} from '../../../src/lib/archive/release-index.js'
import {compareBytes, treeDigest} from '../../../src/lib/tree/release-tree.js'

const file = fc.record({
  path: fc.oneof(fc.string({minLength: 1, maxLength: 40}), fc.constantFrom('a', 'a/b', 'é/"q"', 'x\\y', '\uD83D\uDE00', 'tab\there')),
  size: fc.nat({max: 2 ** 40}),
  executable: fc.boolean(),
  sha256: fc.stringMatching(/^[0-9a-f]{64}$/),
})
const release = fc.record({
  release: fc.constantFrom('foo/tags/1.0.0', 'bar/trunk', 'b"az/tags/2'),
  files: fc.uniqueArray(file, {selector: (f) => f.path, maxLength: 30}).map((files) => files.sort((a, b) => compareBytes(a.path, b.path))),
  dirs: fc.uniqueArray(fc.string({minLength: 1, maxLength: 10}), {maxLength: 4}),
})

test("IndexWriter writes release.json's very bytes (serializeIndex) and each release's treeDigest, keeping no file in memory", (t) => {
  const spool = join(tmpdir(), `index-writer-${process.pid}.spool`)
  fc.assert(
    fc.property(fc.uniqueArray(release, {selector: (r) => r.release, minLength: 1, maxLength: 3}), fc.option(fc.constantFrom('1.0.0', 'x')), (releases, tag) => {
      const fd = openSync(spool, 'w+')
      try {
        const writer = new IndexWriter(fd)
        const digests = releases.map((r) => {
          writer.begin(r.release)
          for (const f of r.files) writer.file(f.path, f.size, f.executable, f.sha256)
          for (const dir of r.dirs) writer.dir(dir)
          return writer.end().digest
        })
        const head = {app: 'foo', tag, release: releases[0].release, modulepath: releases.map((r) => r.release)}
        const {index, size, pieces} = writer.finish(head)
        const expected: ReleaseIndex = {
          format: releases.some((r) => r.dirs.length > 0) ? 2 : 1,
          ...head,
          releases: releases.map((r, i) => ({release: r.release, digest: digests[i], files: r.files, ...(r.dirs.length > 0 ? {dirs: r.dirs} : {})})),
        }
        const bytes = Buffer.concat(Array.from(pieces(), (piece) => Buffer.from(piece)))
        t.deepEqual(digests, releases.map((r) => treeDigest(r.files, r.dirs)))
        t.is(size, bytes.length)
        t.is(bytes.toString(), serializeIndex(expected).toString())
        t.deepEqual(index.releases.map((r) => r.files), releases.map((r) => r.files.length))
      } finally {
        closeSync(fd)
      }
    }),
    {numRuns: 300},
  )
  unlinkSync(spool)
})

test('IndexWriter: a release of thousands of files (its text spilled to the spool many times) reads back whole', (t) => {
  const spool = join(tmpdir(), `index-writer-big-${process.pid}.spool`)
  const fd = openSync(spool, 'w+')
  try {
    const writer = new IndexWriter(fd)
    const files = Array.from({length: 5000}, (_, i) => ({path: `mod/f${String(i).padStart(5, '0')}.pp`, size: i, executable: i % 7 === 0, sha256: (i % 16).toString(16).repeat(64)}))
    writer.begin('foo/tags/1.0.0')
    for (const f of files) writer.file(f.path, f.size, f.executable, f.sha256)
    const {digest} = writer.end()
    const {pieces} = writer.finish({app: 'foo', tag: '1.0.0', release: 'foo/tags/1.0.0', modulepath: ['foo/tags/1.0.0']})
    const expected = serializeIndex({format: 1, app: 'foo', tag: '1.0.0', release: 'foo/tags/1.0.0', modulepath: ['foo/tags/1.0.0'], releases: [{release: 'foo/tags/1.0.0', digest, files}]})
    t.true(Buffer.concat(Array.from(pieces(), (piece) => Buffer.from(piece))).equals(expected))
    t.is(digest, treeDigest(files))
  } finally {
    closeSync(fd)
    unlinkSync(spool)
  }
})
