import {mkdir, readFile, readdir, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import test from 'ava'

import {packRelease} from '../../../src/lib/archive/pack.js'
import {LocalpuppetError} from '../../../src/lib/errors.js'
import {parseReleaseRef} from '../../../src/lib/release/release-ref.js'
import {promoteChannel} from '../../../src/lib/repository/promote.js'
import {publishArchives} from '../../../src/lib/repository/publish.js'
import {type RepositoryIndex, indexChannels, inputPathFor, parseRepositoryIndex, serializeRepositoryIndex} from '../../../src/lib/repository/repository-index.js'
import {rememberIndex, judgeIndex} from '../../../src/lib/source/accepted-versions.js'
import {cli} from '../../helpers/cli.js'
import {tempDir, writeReleases} from '../../helpers/temp.js'

const SHA = 'c'.repeat(64)
const DIGEST = `sha256:${'d'.repeat(64)}`
const tag = (release: string) => ({archive: `archives/x.tar.gz`, size: 1, sha256: SHA, digest: DIGEST, modulepath: [release], digests: {[release]: DIGEST}, signedBy: null, publishedAt: '2026-11-25T00:00:00.000Z'})
const index = (extra: Partial<RepositoryIndex> = {}): RepositoryIndex => ({format: 1, version: 3, expires: '2030-01-01T00:00:00.000Z', apps: {foo: {tags: {'1.0.0': tag('foo/tags/1.0.0'), '1.1.0': tag('foo/tags/1.1.0')}, channels: {stable: '1.0.0', canary: '1.1.0'}}}, ...extra})
const parse = (doc: unknown) => parseRepositoryIndex(Buffer.from(JSON.stringify(doc)), 'index.json')
const refused = (t: any, fn: () => unknown, pattern: RegExp, code = 65) => {
  const error = t.throws(fn) as LocalpuppetError
  t.is(error.exitCode, code)
  t.regex(error.message, pattern)
}

test('a channel reference names an app and a channel; a bad channel name is refused naming it', (t) => {
  t.deepEqual(parseReleaseRef('foo/channels/stable'), {kind: 'channel', app: 'foo', channel: 'stable', text: 'foo/channels/stable'})
  t.deepEqual(parseReleaseRef('app/foo/channels/canary'), {kind: 'channel', app: 'foo', channel: 'canary', text: 'app/foo/channels/canary'})
  refused(t, () => parseReleaseRef('foo/channels/Stable'), /invalid channel name "Stable"/)
  refused(t, () => parseReleaseRef('foo/channels/../x'), /not a release reference|invalid channel/)
})

test('channels and node inputs round-trip through the index, sorted, and the parser checks them', (t) => {
  const published = {input: inputPathFor('web1', SHA), size: 20, sha256: SHA, app: 'foo/channels/stable', publishedAt: '2026-11-25T00:00:00.000Z'}
  const doc = index({nodes: {web1: published}})
  const again = parse(JSON.parse(serializeRepositoryIndex(doc).toString()))
  t.deepEqual(again.apps.foo.channels, {canary: '1.1.0', stable: '1.0.0'})
  t.deepEqual(Object.keys(JSON.parse(serializeRepositoryIndex(doc).toString()).apps.foo.channels), ['canary', 'stable'])
  t.deepEqual(indexChannels(again), {'foo/channels/canary': '1.1.0', 'foo/channels/stable': '1.0.0'})
  t.deepEqual(again.nodes, {web1: published})
  refused(t, () => parse(index({apps: {foo: {tags: {'1.0.0': tag('foo/tags/1.0.0')}, channels: {stable: '9.9.9'}}}})), /channel "foo\/channels\/stable": names tag "9.9.9", which the index does not list/)
  refused(t, () => parse(index({apps: {foo: {tags: {'1.0.0': tag('foo/tags/1.0.0')}, channels: {'../x': '1.0.0'}}}})), /invalid channel name/)
})

test("an index entry cannot point a node at another node's input, or at a path of its choosing", (t) => {
  const entry = (input: string) => index({nodes: {web1: {input, size: 20, sha256: SHA, app: 'foo@^1', publishedAt: 'x'}}})
  refused(t, () => parse(entry(inputPathFor('web2', SHA))), /node "web1": input path "inputs\/web2\/c+\.yaml" is not inputs\/web1\/c+\.yaml/)
  refused(t, () => parse(entry('../../etc/shadow')), /node "web1": input path/)
  refused(t, () => parse(index({nodes: {'../web1': {input: inputPathFor('web1', SHA), size: 1, sha256: SHA, app: 'x', publishedAt: 'x'}}})), /invalid node name/)
  refused(t, () => parse({...entry(inputPathFor('web1', SHA)), nodes: {web1: {input: inputPathFor('web1', SHA), size: 10 ** 9, sha256: SHA, app: 'x'}}}), /invalid size/)
})

test('the node remembers the channels of the newest index it accepted', (t) => {
  const freshness = judgeIndex({format: 2, repositories: {}}, '/srv/repo', {version: 3, expires: '2030-01-01T00:00:00.000Z'}, Date.now())
  const memory = rememberIndex({format: 2, repositories: {}}, '/srv/repo', freshness, Date.now(), {'foo/channels/stable': '1.0.0'})
  t.is(memory.channels!['foo/channels/stable'].tag, '1.0.0')
  const moved = rememberIndex(memory, '/srv/repo', {...freshness, version: 4}, Date.now(), {'foo/channels/stable': '1.1.0'})
  t.is(moved.channels!['foo/channels/stable'].tag, '1.1.0')
  t.is(moved.channels!['foo/channels/stable'].version, 4)
})

async function repoWithTags(t: any): Promise<string> {
  const dir = await tempDir(t)
  const repo = join(dir, 'repo')
  await mkdir(repo)
  await writeFile(join(repo, 'index.json'), serializeRepositoryIndex({format: 1, version: 1, expires: '2030-01-01T00:00:00.000Z', apps: {foo: {tags: {'1.0.0': tag('foo/tags/1.0.0'), '1.1.0': tag('foo/tags/1.1.0')}}}}))
  return repo
}

/** As repoWithTags, with the archives in it: node inputs are validated against them (issue 35). */
async function repoWithArchives(t: any): Promise<string> {
  const dir = await tempDir(t)
  const moduleDir = join(dir, 'modules')
  await writeReleases(moduleDir, {'foo/tags/1.0.0': null, 'foo/tags/1.1.0': null})
  const archives = []
  for (const tag of ['1.0.0', '1.1.0']) archives.push((await packRelease({moduleDir, ref: `foo/tags/${tag}`, output: join(dir, `foo-${tag}.tar.gz`)})).output!)
  const repo = join(dir, 'repo')
  await publishArchives({repo, archives})
  return repo
}

test('promote moves a channel to a published tag under a new index version, and says what it named before', async (t) => {
  const repo = await repoWithTags(t)
  const first = await promoteChannel({repo, release: 'foo/tags/1.0.0', channel: 'stable'})
  t.like(first, {app: 'foo', channel: 'stable', tag: '1.0.0', previous: null, moved: true, version: 2})
  const second = await promoteChannel({repo, release: 'foo/tags/1.1.0', channel: 'stable'})
  t.like(second, {previous: '1.0.0', moved: true, version: 3})
  const same = await promoteChannel({repo, release: 'foo/tags/1.1.0', channel: 'stable'})
  t.like(same, {moved: false, version: 4})
  t.deepEqual(JSON.parse(await readFile(join(repo, 'index.json'), 'utf8')).apps.foo.channels, {stable: '1.1.0'})
  // A repository made before ids gets one from its first promote, and keeps it.
  t.regex(first.repository, /^[0-9a-f]{32}$/)
  t.deepEqual([second.repository, same.repository, JSON.parse(await readFile(join(repo, 'index.json'), 'utf8')).repository], [first.repository, first.repository, first.repository])
})

test('promote refuses a tag that is not published (66), a range (64) and a bad channel name (64), changing nothing', async (t) => {
  const repo = await repoWithTags(t)
  const before = await readFile(join(repo, 'index.json'))
  for (const [release, channel, code, pattern] of [
    ['foo/tags/2.0.0', 'stable', 66, /foo\/tags\/2.0.0 is not published/],
    ['foo@^1', 'stable', 64, /names an exact tag/],
    ['foo/tags/1.0.0', 'Stable!', 64, /not a channel name/],
  ] as const) {
    const error = await t.throwsAsync(promoteChannel({repo, release, channel}))
    t.is((error as LocalpuppetError).exitCode, code, release)
    t.regex(error!.message, pattern)
  }

  t.deepEqual(await readFile(join(repo, 'index.json')), before)
})

test('publish --node: the input is validated as apply validates it, its app must resolve in the repository, and it is stored by content', async (t) => {
  const repo = await repoWithArchives(t)
  const dir = join(repo, '..')
  await writeFile(join(dir, 'web1.yaml'), 'app: foo@^1\nclasses: [foo]\n')
  await writeFile(join(dir, 'bad.yaml'), 'app: foo@^1\nclases: [foo]\n')
  await writeFile(join(dir, 'trunk.yaml'), 'app: foo/trunk\n')
  await writeFile(join(dir, 'channel.yaml'), 'app: foo/channels/stable\n')
  const result = await publishArchives({repo, archives: [], nodes: [{node: 'web1', file: join(dir, 'web1.yaml')}]})
  t.like(result.nodes[0], {node: 'web1', app: 'foo@^1', status: 'added'})
  t.deepEqual(await readdir(join(repo, 'inputs', 'web1')), [`${result.nodes[0].sha256}.yaml`])
  const again = await publishArchives({repo, archives: [], nodes: [{node: 'web1', file: join(dir, 'web1.yaml')}]})
  t.is(again.nodes[0].status, 'unchanged')

  const before = await readFile(join(repo, 'index.json'))
  const bad = await t.throwsAsync(publishArchives({repo, archives: [], nodes: [{node: 'web2', file: join(dir, 'bad.yaml')}]}))
  t.is((bad as LocalpuppetError).exitCode, 65)
  t.regex(bad!.message, /bad\.yaml:2: unknown key "clases" \(did you mean classes\?\)/)
  const trunk = await t.throwsAsync(publishArchives({repo, archives: [], nodes: [{node: 'web2', file: join(dir, 'trunk.yaml')}]}))
  t.regex(trunk!.message, /a repository holds tags only, so node web2 could never fetch it/)
  const channel = await t.throwsAsync(publishArchives({repo, archives: [], nodes: [{node: 'web2', file: join(dir, 'channel.yaml')}]}))
  t.is((channel as LocalpuppetError).exitCode, 66)
  t.regex(channel!.message, /node web2's app foo\/channels\/stable: the repository has no channel stable of foo/)
  const name = await t.throwsAsync(publishArchives({repo, archives: [], nodes: [{node: 'Web_1/../x', file: join(dir, 'web1.yaml')}]}))
  t.is((name as LocalpuppetError).exitCode, 64)
  t.deepEqual(await readFile(join(repo, 'index.json')), before, 'nothing changed by a refused publish')
})

// Names of Object.prototype's members are valid app and channel names: looked up in the index
// as plain properties, they found a function where no entry is.
test('an app or channel named like a member of every JavaScript object (constructor, toString) is published, promoted and checked like any other', async (t) => {
  const repo = await repoWithArchives(t)
  const dir = join(repo, '..')
  const moduleDir = join(dir, 'modules')
  await writeReleases(moduleDir, {'constructor/tags/1.0.0': null})
  const archive = join(dir, 'constructor-1.0.0.tar.gz')
  const packed = await cli(['pack', 'constructor/tags/1.0.0', '--module-dir', moduleDir, '-o', archive])
  t.is(packed.exitCode, 0, packed.stderr)
  const published = await publishArchives({repo, archives: [archive]})
  t.like(published.releases[0], {release: 'constructor/tags/1.0.0', status: 'added'})

  // An input naming a channel foo does not have, while foo has channels: refused, as the node would meet it.
  await promoteChannel({repo, release: 'foo/tags/1.0.0', channel: 'stable'})
  await writeFile(join(dir, 'web2.yaml'), 'app: foo/channels/constructor\n')
  const error = await t.throwsAsync(publishArchives({repo, archives: [], nodes: [{node: 'web2', file: join(dir, 'web2.yaml')}]}))
  t.is((error as LocalpuppetError).exitCode, 66)
  t.regex(error!.message, /the repository has no channel constructor of foo/)

  t.like(await promoteChannel({repo, release: 'foo/tags/1.1.0', channel: 'constructor'}), {previous: null, moved: true})
  t.like(await promoteChannel({repo, release: 'foo/tags/1.0.0', channel: 'constructor'}), {previous: '1.1.0', moved: true})
  t.like((await publishArchives({repo, archives: [], nodes: [{node: 'web2', file: join(dir, 'web2.yaml')}]})).nodes[0], {node: 'web2', status: 'added'})
})
