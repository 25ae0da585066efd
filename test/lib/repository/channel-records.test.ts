import test from 'ava'
import fc from 'fast-check'

import {LocalpuppetError} from '../../../src/lib/errors.js'
import {type ChannelMove, MAX_CHANNEL_HISTORY, previousTag, readChannelRecords, recordMove, yankNamedBy} from '../../../src/lib/repository/channel-records.js'
import {type RepositoryIndex, parseRepositoryIndex, serializeRepositoryIndex, tagInIndex} from '../../../src/lib/repository/repository-index.js'
import {parseReleaseRef} from '../../../src/lib/release/release-ref.js'

const SHA = 'c'.repeat(64)
const DIGEST = `sha256:${'d'.repeat(64)}`
const KEY = `sha256:${'e'.repeat(64)}`
const tag = (release: string, extra = {}) => ({archive: 'archives/x.tar.gz', size: 1, sha256: SHA, digest: DIGEST, modulepath: [release], digests: {[release]: DIGEST}, signedBy: null, publishedAt: '2026-11-25T00:00:00.000Z', ...extra})
const move = (from: string | null, to: string, action: ChannelMove['action'] = 'promote'): ChannelMove => ({at: '2026-11-28T00:00:00.000Z', action, from, to, by: KEY})
const index = (app: Record<string, unknown> = {}): RepositoryIndex =>
  ({format: 1, version: 3, expires: '2030-01-01T00:00:00.000Z', apps: {foo: {tags: {'1.0.0': tag('foo/tags/1.0.0'), '1.1.0': tag('foo/tags/1.1.0')}, channels: {stable: '1.0.0', canary: '1.1.0'}, ...app}}}) as RepositoryIndex
const records = (app: Record<string, unknown>) => () => readChannelRecords(parseRepositoryIndex(serializeRepositoryIndex(index(app)), 'index.json'), 'index.json')
const refused = (t: any, fn: () => unknown, pattern: RegExp, code = 65) => {
  const error = t.throws(fn) as LocalpuppetError
  t.is(error.exitCode, code, error.message)
  t.regex(error.message, pattern)
}

test('histories and policies round-trip through the signed index, and an index without them (an old publisher\'s) reads as none', (t) => {
  const policy = {requireHealthy: 'canary', forMs: 1_800_000, minNodes: 1, setAt: '2026-11-28T00:00:00.000Z', setBy: null}
  const read = records({history: {stable: [move(null, '1.0.0'), move('1.0.0', '1.1.0'), move('1.1.0', '1.0.0', 'back')]}, policies: {stable: policy}})()
  t.is(read.history.foo.stable.length, 3)
  t.deepEqual(read.policies.foo.stable, policy)
  t.deepEqual(records({})(), {history: {}, policies: {}})
})

test('a history entry or policy that does not read is 65 naming the entry; nodes (parseRepositoryIndex) ignore both and keep working', (t) => {
  const bad: Array<[Record<string, unknown>, RegExp]> = [
    [{history: {stable: [move(null, '1.0.0'), {at: 'yesterday', action: 'promote', from: null, to: '1.0.0', by: null}]}}, /apps\.foo\.history\.stable\[1\]: at "yesterday" is not an ISO 8601 time/],
    [{history: {stable: [{...move(null, '1.0.0'), action: 'rm -rf'}]}}, /apps\.foo\.history\.stable\[0\]: action "rm -rf" is neither promote nor back/],
    [{history: {stable: [{...move(null, '1.0.0'), to: '../../x'}]}}, /history\.stable\[0\]: to "..\/..\/x" is not a tag/],
    [{history: {stable: [{...move(null, '1.0.0'), by: 'me'}]}}, /history\.stable\[0\]: by "me" is not a key id/],
    [{history: {stable: [{...move(null, '1.0.0'), override: 'because'}]}}, /history\.stable\[0\]: override is not \{reason, policy\}/],
    [{history: {stable: 'promoted'}}, /apps\.foo\.history\.stable: not a list/],
    [{history: {Stable: []}}, /apps\.foo\.history\.Stable: invalid channel name/],
    [{policies: {stable: {requireHealthy: 'stable', forMs: 0, minNodes: 1, setAt: '2026-11-28T00:00:00.000Z', setBy: null}}}, /policies\.stable: requires health on the channel itself/],
    [{policies: {stable: {requireHealthy: 'Canary!', forMs: 0, minNodes: 1, setAt: '2026-11-28T00:00:00.000Z', setBy: null}}}, /policies\.stable: requireHealthy "Canary!" is not a channel name/],
    [{policies: {stable: {requireHealthy: 'canary', forMs: -1, minNodes: 1, setAt: '2026-11-28T00:00:00.000Z', setBy: null}}}, /policies\.stable: forMs -1 is not a duration/],
    [{policies: {stable: {requireHealthy: 'canary', forMs: 0, minNodes: 0, setAt: '2026-11-28T00:00:00.000Z', setBy: null}}}, /policies\.stable: minNodes 0/],
  ]
  for (const [app, pattern] of bad) {
    refused(t, records(app), pattern)
    // A node reads the same index without complaint: it never uses histories or policies.
    t.notThrows(() => parseRepositoryIndex(serializeRepositoryIndex(index(app)), 'index.json'))
  }
})

test('a yank record is checked by every reader (nodes included): a malformed one refuses the index, naming the tag', (t) => {
  const yanked = (value: unknown) => () => parseRepositoryIndex(Buffer.from(JSON.stringify({...index(), apps: {foo: {tags: {'1.0.0': tag('foo/tags/1.0.0', {yanked: value})}}}})), 'index.json')
  t.notThrows(yanked({at: '2026-11-28T00:00:00.000Z', reason: 'breaks nginx', by: null}))
  refused(t, yanked(true), /tag "foo\/tags\/1\.0\.0": yanked is not an object/)
  refused(t, yanked({at: '2026-11-28T00:00:00.000Z', reason: '', by: null}), /tag "foo\/tags\/1\.0\.0": yanked\.reason is not a reason/)
  refused(t, yanked({at: 'now', reason: 'x', by: null}), /yanked\.at "now"/)
})

test('a range never resolves to a yanked tag; an exact tag (or a channel on one) is found and said to be yanked', (t) => {
  const doc = index()
  doc.apps.foo.tags['1.1.0'].yanked = {at: '2026-11-28T00:00:00.000Z', reason: 'breaks nginx', by: null}
  const ref = (text: string) => parseReleaseRef(text) as Parameters<typeof tagInIndex>[1]
  t.is(tagInIndex(doc, ref('foo@^1')), '1.0.0')
  t.is(tagInIndex(doc, ref('foo@~1.1')), undefined)
  t.is(yankNamedBy(doc, ref('foo/tags/1.1.0')), 'foo/tags/1.1.0 is yanked (2026-11-28T00:00:00.000Z: breaks nginx)')
  t.regex(yankNamedBy(doc, ref('foo@1.1.0'))!, /is yanked/)
  t.regex(yankNamedBy(doc, ref('foo/channels/canary'))!, /foo\/tags\/1\.1\.0 is yanked/)
  t.is(yankNamedBy(doc, ref('foo@^1')), null)
  t.is(yankNamedBy(doc, ref('foo/channels/stable')), null)
})

test(`a huge history is cut to the newest ${MAX_CHANNEL_HISTORY} moves by the next move, the newest kept last`, (t) => {
  const huge = Array.from({length: 20_000}, (_, i) => move(i % 2 ? '1.0.0' : '1.1.0', i % 2 ? '1.1.0' : '1.0.0'))
  const doc = parseRepositoryIndex(serializeRepositoryIndex(index({history: {stable: huge}})), 'index.json')
  t.is(readChannelRecords(doc, 'index.json').history.foo.stable.length, 20_000, 'read as it is (the index itself is bounded at 16 MiB)')
  recordMove(doc, 'foo', 'stable', move('1.0.0', '1.1.0', 'back'))
  const kept = readChannelRecords(parseRepositoryIndex(serializeRepositoryIndex(doc), 'index.json'), 'index.json').history.foo.stable
  t.is(kept.length, MAX_CHANNEL_HISTORY)
  t.is(kept.at(-1)!.action, 'back')
})

test('back walks down the promotions: 1 -> 2 -> 3 gives 2, then 1, then nothing; a back is never undone by another back', (t) => {
  const history = [move(null, '1'), move('1', '2'), move('2', '3')]
  t.is(previousTag(history, '3'), '2')
  history.push(move('3', '2', 'back'))
  t.is(previousTag(history, '2'), '1')
  history.push(move('2', '1', 'back'))
  t.is(previousTag(history, '1'), null)
  t.is(previousTag([], '1'), null)
})

test('property: after any sequence of promotions, back returns the tag the channel named just before its current one was promoted', (t) => {
  fc.assert(
    fc.property(fc.array(fc.constantFrom('1.0.0', '1.1.0', '1.2.0', '2.0.0'), {minLength: 1, maxLength: 30}), (tags) => {
      const history: ChannelMove[] = []
      let current: string | null = null
      for (const next of tags) {
        if (next === current) continue
        history.push(move(current, next))
        current = next
      }

      const last = history.at(-1)!
      return previousTag(history, current!) === last.from
    }),
  )
  t.pass()
})
