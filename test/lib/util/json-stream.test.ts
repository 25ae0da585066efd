import test from 'ava'
import fc from 'fast-check'

import {type ByteSource, JsonReader, JsonStreamError, MoreBytesNeeded} from '../../../src/lib/util/json-stream.js'

/** The bytes of `text`, handed over `size` bytes at a time (a multi-byte character split across reads). */
function source(text: string, size: number): ByteSource {
  const bytes = Buffer.from(text)
  let at = 0
  return (buffer) => {
    const count = Math.min(size, buffer.length, bytes.length - at)
    bytes.copy(buffer, 0, at, at + count)
    at += count
    return count
  }
}

/** An object read back as a caller walks one: arrays by their elements in batches, everything else whole. */
function readBack(text: string, chunk: number, batch: number, arrays?: string[]): Record<string, unknown> {
  const reader = new JsonReader(source(text, chunk), chunk)
  const isArray = (key: string) => (arrays ? arrays.includes(key) : Array.isArray((JSON.parse(text) as Record<string, unknown>)[key]))
  const read: Record<string, unknown> = {}
  reader.enterObject()
  for (let key; (key = reader.key()) !== null; ) {
    if (isArray(key)) {
      reader.enterArray()
      const all: unknown[] = []
      for (let some; (some = reader.elements(batch)).length > 0; ) all.push(...some)
      read[key] = all
    } else read[key] = reader.value()
  }

  reader.finish()
  return read
}

const json = fc.jsonValue()
const document = fc.dictionary(fc.string().filter((key) => key !== '__proto__'), fc.oneof(json, fc.array(json)))

test('a document walked piece by piece reads back as JSON.parse reads it, whatever the sizes of the reads and batches', (t) => {
  fc.assert(
    fc.property(document, fc.integer({min: 1, max: 9}), fc.integer({min: 1, max: 200}), fc.boolean(), (doc, chunk, batch, pretty) => {
      const text = JSON.stringify(doc, null, pretty ? 1 : undefined)
      t.deepEqual(readBack(text, chunk, batch), JSON.parse(text))
    }),
    {numRuns: 300},
  )
})

/**
 * The same walk over bytes that arrive `chunk` at a time, only once the walk has run dry
 * (the source throws MoreBytesNeeded, as a network answer's does): each step is attempted,
 * undone when the bytes ran out, and tried again once more came.
 */
function readBackArriving(text: string, chunk: number, batch: number): Record<string, unknown> {
  const bytes = Buffer.from(text)
  let given = 0
  let at = 0
  const reader = new JsonReader((buffer) => {
    if (at >= bytes.length) return 0
    if (at >= given) throw new MoreBytesNeeded()
    const count = Math.min(buffer.length, given - at, bytes.length - at)
    bytes.copy(buffer, 0, at, at + count)
    at += count
    return count
  }, 7)
  const run = <T>(step: () => T): T => {
    for (;;) {
      const done = reader.attempt(step)
      if (done) return done.value
      given += chunk
    }
  }

  const read: Record<string, unknown> = {}
  run(() => reader.enterObject())
  for (let key; (key = run(() => reader.key())) !== null; ) {
    if (Array.isArray((JSON.parse(text) as Record<string, unknown>)[key])) {
      run(() => reader.enterArray())
      const all: unknown[] = []
      for (let some; (some = run(() => reader.elements(batch))).length > 0; ) all.push(...some)
      read[key] = all
    } else read[key] = run(() => reader.value())
  }

  run(() => reader.finish())
  return read
}

test('a document arriving in pieces, each step undone when the bytes ran out and tried again, reads back as JSON.parse reads it', (t) => {
  fc.assert(
    fc.property(document, fc.integer({min: 1, max: 9}), fc.integer({min: 1, max: 200}), (doc, chunk, batch) => {
      const text = JSON.stringify(doc)
      t.deepEqual(readBackArriving(text, chunk, batch), JSON.parse(text))
    }),
    {numRuns: 300},
  )
  // Longer than the text a reader keeps (64 KiB): what was dropped never includes a step being attempted.
  const long = {a: Array.from({length: 5000}, (_, i) => ({i, s: 'x'.repeat(i % 50)})), b: 'end'}
  t.deepEqual(readBackArriving(JSON.stringify(long), 1000, 3000), long)
})

test('strings with quotes, backslashes, brackets and multi-byte characters split across reads', (t) => {
  const doc = {a: ['\\', '\\"', '"}]', 'é€😀', {'k"}': ['[', '\\\\']}], b: 'x\\', c: -1.5e3, d: null, e: true}
  for (const chunk of [1, 2, 3, 5]) t.deepEqual(readBack(JSON.stringify(doc), chunk, 1), doc)
})

test('a long array comes in batches of about the size asked, the text kept stays small', (t) => {
  const files = Array.from({length: 20_000}, (_, i) => ({path: `mod/files/f${i}.txt`, size: i, executable: i % 3 === 0, sha256: 'ab'.repeat(32)}))
  const reader = new JsonReader(source(JSON.stringify({format: 1, files, tail: 'end'}), 4096))
  reader.enterObject()
  t.is(reader.key(), 'format')
  t.is(reader.value(), 1)
  t.is(reader.key(), 'files')
  reader.enterArray()
  let count = 0
  let batches = 0
  for (let some; (some = reader.elements(16 * 1024)).length > 0; batches++) {
    t.deepEqual(some[0], files[count])
    count += some.length
  }

  t.is(count, files.length)
  t.true(batches > 50)
  t.is(reader.key(), 'tail')
  t.is(reader.value(), 'end')
  t.is(reader.key(), null)
  reader.finish()
})

for (const [text, why] of [
  ['{"a":1,}', 'a trailing comma in an object'],
  ['{"a":[1,]}', 'a trailing comma in an array'],
  ['{"a":[1 2]}', 'a missing comma'],
  ['{"a":1 "b":2}', 'a missing comma between keys'],
  ['{"a":[1,2]', 'a missing end'],
  ['{"a":"x', 'a string cut short'],
  ['{"a":1} x', 'text after the document'],
  ['{"a":tru}', 'a misspelt literal'],
  ['{a:1}', 'a key without quotes'],
  ['', 'nothing'],
] as const) {
  test(`not JSON: ${why}`, (t) => {
    t.throws(() => readBack(text, 3, 10, ['a']), {instanceOf: JsonStreamError})
  })
}

test('an array of objects walked element by element, each entered', (t) => {
  const doc = {releases: [{release: 'a', files: [{path: 'x'}, {path: 'y'}]}, {release: 'b', files: []}], after: 1}
  const reader = new JsonReader(source(JSON.stringify(doc, null, 1), 3))
  const read: Array<{release: unknown; files: unknown[]}> = []
  reader.enterObject()
  t.is(reader.key(), 'releases')
  reader.enterArray()
  while (reader.nextElement()) {
    reader.enterObject()
    const entry = {release: undefined as unknown, files: [] as unknown[]}
    for (let key; (key = reader.key()) !== null; ) {
      if (key === 'files') {
        reader.enterArray()
        for (let some; (some = reader.elements(1)).length > 0; ) entry.files.push(...some)
      } else entry.release = reader.value()
    }

    read.push(entry)
  }

  t.deepEqual(read, doc.releases)
  t.is(reader.key(), 'after')
  t.is(reader.value(), 1)
  t.is(reader.key(), null)
  reader.finish()
})
