import test from 'ava'
import fc from 'fast-check'

import {LocalpuppetError} from '../../../src/lib/errors.js'
import {type RepositoryIndex, parseRepositoryIndex, serializeRepositoryIndex, tagInIndex} from '../../../src/lib/repository/repository-index.js'
import {sourceKind} from '../../../src/lib/source/release-source.js'

const digest = (c: string) => `sha256:${c.repeat(64)}`

function validIndex(): any {
  return {
    format: 1,
    apps: {
      foo: {
        tags: {
          '1.5.0': {
            archive: 'archives/foo/foo-1.5.0.tar.gz',
            size: 1234,
            sha256: 'a'.repeat(64),
            digest: digest('b'),
            modulepath: ['foo/tags/1.5.0', 'dist/tags/2.0.1'],
            digests: {'foo/tags/1.5.0': digest('b'), 'dist/tags/2.0.1': digest('c')},
            signedBy: null,
            publishedAt: '2026-11-22T00:00:00.000Z',
          },
        },
      },
    },
  }
}

const parse = (doc: unknown) => parseRepositoryIndex(Buffer.from(JSON.stringify(doc)), 'https://r/index.json')

test('a valid index parses and serialises to the same bytes every time', (t) => {
  const index = parse(validIndex())
  t.deepEqual(serializeRepositoryIndex(index), serializeRepositoryIndex(parse(JSON.parse(serializeRepositoryIndex(index).toString()))))
})

test('version and expiry: kept, serialised inside the signed bytes, before the apps; an index without them (older publishers) still parses', (t) => {
  const doc = {...validIndex(), version: 7, expires: '2026-12-25T00:00:00.000Z'}
  const index = parse(doc)
  t.is(index.version, 7)
  t.is(index.expires, '2026-12-25T00:00:00.000Z')
  const bytes = serializeRepositoryIndex(index).toString()
  t.regex(bytes, /^\{\n "format": 1,\n "version": 7,\n "expires": "2026-12-25T00:00:00\.000Z",\n "apps"/)
  const old = parse(validIndex())
  t.is(old.version, undefined)
  t.false(serializeRepositoryIndex(old).toString().includes('version'))
})

test('the repository id: kept, serialised first inside the signed bytes; an index without one (older publishers) still parses', (t) => {
  const id = '0123456789abcdef0123456789abcdef'
  const index = parse({...validIndex(), repository: id, version: 7, expires: '2026-12-25T00:00:00.000Z'})
  t.is(index.repository, id)
  t.regex(serializeRepositoryIndex(index).toString(), new RegExp(`^\\{\\n "format": 1,\\n "repository": "${id}",\\n "version": 7,`))
  t.false(serializeRepositoryIndex(parse(validIndex())).toString().includes('repository'))
})

const hostile: Array<[string, (doc: any) => void, RegExp]> = [
  ['a repository id that is not 32 hex digits', (d) => (d.repository = 'production'), /invalid repository "production" \(expected 32 hex digits\)/],
  ['a repository id in upper case', (d) => (d.repository = 'A'.repeat(32)), /invalid repository "A{32}"/],
  ['a repository id that is a number', (d) => (d.repository = 1), /invalid repository 1/],
  ['a version without an expiry', (d) => (d.version = 3), /invalid expires undefined/],
  ['an expiry without a version', (d) => (d.expires = '2026-12-25T00:00:00.000Z'), /invalid version undefined/],
  ['version 0', (d) => Object.assign(d, {version: 0, expires: '2026-12-25T00:00:00.000Z'}), /invalid version 0/],
  ['a fractional version', (d) => Object.assign(d, {version: 1.5, expires: '2026-12-25T00:00:00.000Z'}), /invalid version 1\.5/],
  ['a version as a string', (d) => Object.assign(d, {version: '9', expires: '2026-12-25T00:00:00.000Z'}), /invalid version "9"/],
  ['an expiry that is no date', (d) => Object.assign(d, {version: 2, expires: 'next year'}), /invalid expires "next year"/],
  ['an expiry in another time zone', (d) => Object.assign(d, {version: 2, expires: '2026-12-25T00:00:00+01:00'}), /invalid expires/],

  ['archive with ..', (d) => (d.apps.foo.tags['1.5.0'].archive = '../x.tar.gz'), /archive path .* is absolute, has '\.\.'/],
  ['absolute archive', (d) => (d.apps.foo.tags['1.5.0'].archive = '/etc/shadow'), /archive path/],
  ['app name with a slash', (d) => (d.apps['../foo'] = d.apps.foo), /invalid app or tag name/],
  ['tag ..', (d) => (d.apps.foo.tags['..'] = d.apps.foo.tags['1.5.0']), /invalid app or tag name/],
  ['negative size', (d) => (d.apps.foo.tags['1.5.0'].size = -1), /invalid size/],
  ['sha256 not hex', (d) => (d.apps.foo.tags['1.5.0'].sha256 = 'zz'), /invalid sha256/],
  ['modulepath not starting with the release', (d) => d.apps.foo.tags['1.5.0'].modulepath.reverse(), /modulepath must start with the release itself/],
  ['a trunk dependency', (d) => d.apps.foo.tags['1.5.0'].modulepath.push('dist/trunk'), /"dist\/trunk" is not a tag/],
  ['a digest missing', (d) => delete d.apps.foo.tags['1.5.0'].digests['dist/tags/2.0.1'], /no valid digest for dist\/tags\/2\.0\.1/],
  ['another format', (d) => (d.format = 2), /format 2 is not supported/],
  ['not an object', (d) => (d.apps = []), /apps is not an object/],
]

for (const [name, mutate, message] of hostile) {
  test(`a hostile index is refused (65): ${name}`, (t) => {
    const doc = validIndex()
    mutate(doc)
    const error = t.throws(() => parse(doc))
    t.is((error as LocalpuppetError).exitCode, 65)
    t.regex(error!.message, message)
  })
}

test('any JSON at all either parses into safe paths or is a 65, never another error', (t) => {
  fc.assert(
    fc.property(fc.jsonValue(), fc.string(), (value, archive) => {
      const doc = validIndex()
      doc.apps.foo.tags['1.5.0'].archive = archive
      for (const candidate of [value, doc]) {
        try {
          const index = parse(candidate)
          for (const app of Object.values(index.apps)) {
            for (const tag of Object.values(app.tags)) if (tag.archive.startsWith('/') || tag.archive.split('/').includes('..')) return false
          }
        } catch (error) {
          if (!(error instanceof LocalpuppetError) || error.exitCode !== 65) return false
        }
      }

      return true
    }),
  )
  t.pass()
})

test('source kinds: https, http, file:// and a directory; other schemes are a usage error', (t) => {
  t.is(sourceKind('https://r.example.com/p'), 'https')
  t.is(sourceKind('HTTP://r.example.com/p'), 'http')
  t.is(sourceKind('file:///srv/repo'), 'file')
  t.is(sourceKind('/srv/repo'), 'dir')
  t.is(sourceKind('repo'), 'dir')
  t.is((t.throws(() => sourceKind('ftp://r/p')) as LocalpuppetError).exitCode, 64)
})

test('tagInIndex: a tag listed, a channel\'s tag, a range\'s newest match or a tag named exactly; only the index\'s own entries', (t) => {
  const index: RepositoryIndex = {format: 1, apps: {foo: {tags: {'1.3.0': {} as never, '1.4.0': {} as never, nightly: {} as never}, channels: {stable: '1.3.0'}}}}
  t.is(tagInIndex(index, {kind: 'tag', app: 'foo', tag: '1.4.0', text: 'foo/tags/1.4.0'}), '1.4.0')
  t.is(tagInIndex(index, {kind: 'channel', app: 'foo', channel: 'stable', text: 'foo/channels/stable'}), '1.3.0')
  t.is(tagInIndex(index, {kind: 'range', app: 'foo', range: '^1', text: 'foo@^1'}), '1.4.0')
  t.is(tagInIndex(index, {kind: 'range', app: 'foo', range: 'nightly', text: 'foo@nightly'}), 'nightly')
  t.is(tagInIndex(index, {kind: 'tag', app: 'foo', tag: '2.0.0', text: 'foo/tags/2.0.0'}), undefined)
  t.is(tagInIndex(index, {kind: 'range', app: 'foo', range: '^2', text: 'foo@^2'}), undefined)
  t.is(tagInIndex(index, {kind: 'channel', app: 'foo', channel: 'constructor', text: 'foo/channels/constructor'}), undefined)
  t.is(tagInIndex(index, {kind: 'tag', app: 'constructor', tag: '1.0.0', text: 'constructor/tags/1.0.0'}), undefined)
})
