import {generateKeyPairSync} from 'node:crypto'

import test from 'ava'
import fc from 'fast-check'

import {signIndex, verifyIndexSignature} from '../../../../src/lib/archive/signature.js'
import {LocalpuppetError} from '../../../../src/lib/errors.js'
import {canonicalJson, changedDocuments} from '../../../../src/lib/repository/node-documents/changed.js'
import {
  MAX_NODE_DOCUMENT_BYTES,
  buildNodeDocument,
  documentBody,
  indexFromDocument,
  nodeDocumentPath,
  parseNodeDocument,
  serializeNodeDocument,
  signNodeDocument,
  verifyNodeDocumentSignature,
} from '../../../../src/lib/repository/node-documents/document.js'
import {type RepositoryIndex, inputPathFor, parseRepositoryIndex, serializeRepositoryIndex, tagInIndex} from '../../../../src/lib/repository/repository-index.js'

const REPO = 'a'.repeat(32)
const digest = (c: string) => `sha256:${c.repeat(64)}`
const tag = (app: string, name: string) => ({
  archive: `archives/${app}/${app}-${name}.tar.gz`,
  size: 10,
  sha256: 'a'.repeat(64),
  digest: digest('b'),
  modulepath: [`${app}/tags/${name}`],
  digests: {[`${app}/tags/${name}`]: digest('b')},
  signedBy: null,
  publishedAt: '2026-11-22T00:00:00.000Z',
})
const input = (node: string, app: string, c = 'c') => ({input: inputPathFor(node, c.repeat(64)), size: 30, sha256: c.repeat(64), app, publishedAt: '2026-11-22T00:00:00.000Z'})

function index(): RepositoryIndex {
  return {
    format: 1,
    repository: REPO,
    version: 7,
    expires: '2099-01-01T00:00:00.000Z',
    apps: {
      foo: {tags: {'1.0.0': tag('foo', '1.0.0'), '1.1.0': tag('foo', '1.1.0'), '2.0.0': tag('foo', '2.0.0')}, channels: {stable: '1.0.0', canary: '1.1.0'}},
      bar: {tags: {'0.1.0': tag('bar', '0.1.0')}},
    },
    nodes: {web1: input('web1', 'foo/channels/stable'), web2: input('web2', 'foo/channels/canary', 'd'), db1: input('db1', 'foo@^1', 'e'), app1: input('app1', 'bar/tags/0.1.0', 'f')},
    layers: {'site/dc1': {layer: `layers/site/dc1/${'9'.repeat(64)}.yaml`, size: 5, sha256: '9'.repeat(64), publishedAt: '2026-11-22T00:00:00.000Z'}},
  }
}

function refuses(t: import('ava').ExecutionContext, fn: () => unknown, message: RegExp) {
  const error = t.throws(fn as () => void) as LocalpuppetError
  t.true(error instanceof LocalpuppetError, String(error))
  t.is(error.exitCode, 65)
  t.regex(error.message, message)
}

const WHERE = 'http://r/nodes/x.json'
const bytesOf = (doc: unknown) => Buffer.from(JSON.stringify(doc))
const webDoc = () => JSON.parse(serializeNodeDocument(buildNodeDocument(index(), 'web1', 5, '2099-01-01T00:00:00.000Z')!).toString()) as Record<string, any>

test("a node's document holds its own input, the layers, and only the tags and channel its app can resolve to: nothing of any other node", (t) => {
  const doc = buildNodeDocument(index(), 'web1', 5, '2099-01-01T00:00:00.000Z')!
  const bytes = serializeNodeDocument(doc)
  t.false(bytes.toString().includes('web2'))
  t.false(bytes.toString().includes('db1'))
  t.false(bytes.toString().includes('bar'))
  t.deepEqual(Object.keys(doc.apps.foo.tags), ['1.0.0'])
  t.deepEqual(doc.apps.foo.channels, {stable: '1.0.0'})
  const parsed = parseNodeDocument(bytes, WHERE, {node: 'web1', repository: REPO})
  t.deepEqual(parsed, JSON.parse(bytes.toString()))
  // The index a fetch runs on resolves the node's app as the whole index does.
  const built = indexFromDocument(parsed)
  t.is(tagInIndex(built, {kind: 'channel', app: 'foo', channel: 'stable', text: 'foo/channels/stable'}), '1.0.0')
  t.deepEqual(Object.keys(built.nodes!), ['web1'])
  // A range: every tag it matches, yanked ones with their yank, so the node skips them as the index would.
  const yanked = index()
  yanked.apps.foo.tags['1.1.0'].yanked = {at: '2026-11-23T00:00:00.000Z', by: 'sha256:' + 'e'.repeat(64), reason: 'broken'} as any
  const ranged = buildNodeDocument(yanked, 'db1', 5, '2099-01-01T00:00:00.000Z')!
  t.deepEqual(Object.keys(ranged.apps.foo.tags).sort(), ['1.0.0', '1.1.0'])
  t.is(tagInIndex(indexFromDocument(ranged), {kind: 'range', app: 'foo', range: '^1', text: 'foo@^1'}), tagInIndex(yanked, {kind: 'range', app: 'foo', range: '^1', text: 'foo@^1'}))
  // Its path names no node, and differs per repository.
  t.regex(nodeDocumentPath(REPO, 'web1'), /^nodes\/[0-9a-f]{64}\.json$/)
  t.not(nodeDocumentPath(REPO, 'web1'), nodeDocumentPath('b'.repeat(32), 'web1'))
})

test("another node's document, the index itself, or another repository's document in a node's place is refused (65), naming the key", (t) => {
  const bytes = serializeNodeDocument(buildNodeDocument(index(), 'web2', 5, '2099-01-01T00:00:00.000Z')!)
  refuses(t, () => parseNodeDocument(bytes, WHERE, {node: 'web1', repository: REPO}), /^http:\/\/r\/nodes\/x\.json: node: the document of node "web2", not of web1 \(another node's document served in its place\); refused$/)
  refuses(t, () => parseNodeDocument(serializeRepositoryIndex(index()), WHERE, {node: 'web1', repository: REPO}), /kind null is not "node"/)
  refuses(t, () => parseNodeDocument(bytes, WHERE, {node: 'web2', repository: 'b'.repeat(32)}), /repository: of repository a{32}, not b{32}/)
  // And a document where index.json should be: refused by the index's parser too.
  refuses(t, () => parseRepositoryIndex(bytes, 'http://r/index.json'), /kind "node": a node's document, not a repository index/)
})

test('a node document is parsed trusting nothing: size, format, version, expiry, unknown keys and every entry (65 naming the file and key)', (t) => {
  const cases: Array<[(doc: Record<string, any>) => void, RegExp]> = [
    [(d) => (d.format = 2), /format 2 is not supported/],
    [(d) => (d.version = 0), /version 0: expected an integer from 1/],
    [(d) => (d.version = '5'), /version "5"/],
    [(d) => (d.expires = 'tomorrow'), /invalid expires "tomorrow"/],
    [(d) => (d.extra = 1), /unknown key "extra"/],
    [(d) => (d.apps.foo.history = {}), /apps\.foo: unknown key "history"/],
    [(d) => (d.input.input = '../index.json'), /node "web1": input path/],
    [(d) => (d.input.size = -1), /node "web1": invalid size/],
    [(d) => (d.apps.foo.channels.stable = '9.9.9'), /names tag "9\.9\.9", which the index does not list/],
    [(d) => (d.apps.foo.tags['1.0.0'].archive = '/etc/shadow'), /archive path/],
    [(d) => (d.layers['site/dc1'].layer = 'layers/x.yaml'), /layer "site\/dc1": path/],
    [(d) => (d.node = '../x'), /invalid node name/],
    [(d) => (d.repository = 'zz'), /repository "zz"/],
    [(d) => (d.input = []), /input: not an object/],
  ]
  for (const [spoil, message] of cases) {
    const doc = webDoc()
    spoil(doc)
    refuses(t, () => parseNodeDocument(bytesOf(doc), WHERE, {node: 'web1', repository: REPO}), message)
  }

  refuses(t, () => parseNodeDocument(Buffer.from('{'), WHERE, {node: 'web1', repository: REPO}), /not valid JSON/)
  refuses(t, () => parseNodeDocument(Buffer.alloc(MAX_NODE_DOCUMENT_BYTES + 1, 0x20), WHERE, {node: 'web1', repository: REPO}), /larger than/)
})

test("a document's signature is its own: it never verifies as the index's, nor the index's as a document's (the same key signs both)", (t) => {
  const {privateKey, publicKey} = generateKeyPairSync('ed25519')
  const bytes = serializeNodeDocument(buildNodeDocument(index(), 'web1', 5, '2099-01-01T00:00:00.000Z')!)
  t.regex(verifyNodeDocumentSignature(bytes, signNodeDocument(bytes, privateKey), [publicKey], WHERE), /^sha256:/)
  refuses(t, () => verifyNodeDocumentSignature(bytes, signIndex(bytes, privateKey), [publicKey], WHERE), /does not verify/)
  refuses(t, () => verifyIndexSignature(bytes, signNodeDocument(bytes, privateKey), [publicKey], WHERE), /does not verify/)
})

test('the changed set: one node edited is that node; a channel promoted is its followers; a tag yanked those whose range or channel reaches it; the layers or a renewal all; a node removed is removed', (t) => {
  const before = index()
  const edit = (change: (i: RepositoryIndex) => void, all = false) => {
    const after = structuredClone(before)
    change(after)
    const changes = changedDocuments(before, after, {all})
    return {write: [...changes.write].sort(), remove: changes.remove, all: changes.all}
  }

  t.deepEqual(edit(() => {}), {write: [], remove: [], all: false})
  t.deepEqual(edit((i) => (i.nodes!.web2 = input('web2', 'foo/channels/canary', '1'))), {write: ['web2'], remove: [], all: false})
  t.deepEqual(edit((i) => (i.apps.foo.channels!.canary = '2.0.0')), {write: ['web2'], remove: [], all: false})
  t.deepEqual(edit((i) => ((i.apps.foo.tags['1.1.0'] as any).yanked = {at: '2026-11-23T00:00:00.000Z', by: 'x', reason: 'r'})), {write: ['db1', 'web2'], remove: [], all: false})
  // A new tag: the range's followers (it may now resolve to it), not a channel's nor another app's.
  t.deepEqual(edit((i) => (i.apps.foo.tags['1.2.0'] = tag('foo', '1.2.0'))), {write: ['db1'], remove: [], all: false})
  t.deepEqual(edit((i) => delete i.nodes!.app1), {write: [], remove: ['app1'], all: false})
  t.deepEqual(edit((i) => (i.layers!['site/dc2'] = {...i.layers!['site/dc1'], layer: `layers/site/dc2/${'9'.repeat(64)}.yaml`})).write, ['app1', 'db1', 'web1', 'web2'])
  t.deepEqual(edit(() => {}, true).write, ['app1', 'db1', 'web1', 'web2'])
  // The same entries built in another key order are no change.
  t.deepEqual(
    edit((i) => {
      const {app, sha256, size, input: path, publishedAt} = i.nodes!.web1
      i.nodes!.web1 = {publishedAt, app, input: path, size, sha256}
    }),
    {write: [], remove: [], all: false},
  )
})

test('property: every node whose document would differ after an index change is in the changed set (seed printed on failure)', (t) => {
  const tags = ['1.0.0', '1.1.0', '1.2.0', '2.0.0']
  const refs = ['foo/channels/stable', 'foo/channels/canary', 'foo@^1', 'foo@~1.1', 'foo/tags/1.1.0', 'bar/tags/0.1.0', 'bar@*']
  const step = fc.oneof(
    fc.record({kind: fc.constant('node' as const), node: fc.constantFrom('web1', 'web2', 'db1', 'app1', 'new1'), ref: fc.constantFrom(...refs), c: fc.constantFrom('1', '2', 'c')}),
    fc.record({kind: fc.constant('remove' as const), node: fc.constantFrom('web1', 'web2', 'db1', 'app1')}),
    fc.record({kind: fc.constant('promote' as const), channel: fc.constantFrom('stable', 'canary'), tag: fc.constantFrom('1.0.0', '1.1.0', '2.0.0')}),
    fc.record({kind: fc.constant('tag' as const), tag: fc.constantFrom(...tags, '1.3.0', '0.9.0')}),
    fc.record({kind: fc.constant('yank' as const), tag: fc.constantFrom(...tags)}),
  )
  fc.assert(
    fc.property(fc.array(step, {maxLength: 6}), (steps) => {
      const before = index()
      const after = structuredClone(before)
      for (const s of steps) {
        if (s.kind === 'node') after.nodes![s.node] = input(s.node, s.ref, s.c)
        else if (s.kind === 'remove') delete after.nodes![s.node]
        else if (s.kind === 'promote') after.apps.foo.channels![s.channel] = s.tag
        else if (s.kind === 'tag') after.apps.foo.tags[s.tag] ??= tag('foo', s.tag)
        else if (Object.hasOwn(after.apps.foo.tags, s.tag)) (after.apps.foo.tags[s.tag] as any).yanked = {at: '2026-11-23T00:00:00.000Z', by: 'x', reason: 'r'}
      }

      const {write, remove} = changedDocuments(before, after)
      for (const node of Object.keys(after.nodes!)) {
        const differs = canonicalJson(documentBody(before, node) ?? null) !== canonicalJson(documentBody(after, node))
        if (differs && !write.includes(node)) return false
      }

      return Object.keys(before.nodes!).every((node) => Object.hasOwn(after.nodes!, node) || remove.includes(node))
    }),
    {verbose: true},
  )
  t.pass()
})
