import {realpath, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import test from 'ava'

import {LocalpuppetError} from '../../../src/lib/errors.js'
import {parseReleaseRef} from '../../../src/lib/release/release-ref.js'
import {resolveRelease} from '../../../src/lib/release/resolve.js'
import {addNodeInputs, checkNodeInputs, nodeInputsIn} from '../../../src/lib/repository/publish-inputs.js'
import {inputPathFor, parseRepositoryIndex} from '../../../src/lib/repository/repository-index.js'
import {tempDir, writeReleases} from '../../helpers/temp.js'

const digest = (c: string) => `sha256:${c.repeat(64)}`
const tag = (release: string) => ({
  archive: `archives/foo/${release.split('/').pop()}.tar.gz`,
  size: 10,
  sha256: 'a'.repeat(64),
  digest: digest('b'),
  modulepath: [release],
  digests: {[release]: digest('b')},
  signedBy: null,
  publishedAt: '2026-11-22T00:00:00.000Z',
})

function index(): any {
  return {
    format: 1,
    apps: {foo: {tags: {'1.0.0': tag('foo/tags/1.0.0'), '1.1.0': tag('foo/tags/1.1.0')}, channels: {stable: '1.0.0', canary: '1.1.0'}}},
    nodes: {
      web1: {input: inputPathFor('web1', 'c'.repeat(64)), size: 30, sha256: 'c'.repeat(64), app: 'foo/channels/stable', publishedAt: '2026-11-22T00:00:00.000Z'},
      db1: {input: inputPathFor('db1', 'd'.repeat(64)), size: 30, sha256: 'd'.repeat(64), app: 'foo/tags/1.0.0', publishedAt: '2026-11-22T00:00:00.000Z'},
    },
  }
}

const parse = (doc: unknown) => parseRepositoryIndex(Buffer.from(JSON.stringify(doc)), 'https://r/index.json')

/** The error `fn` throws: a LocalpuppetError with this exit code and a message matching. */
function refuses(t: import('ava').ExecutionContext, fn: () => unknown, exitCode: number, message: RegExp) {
  const error = t.throws(fn as () => void) as LocalpuppetError
  t.true(error instanceof LocalpuppetError, String(error))
  t.is(error.exitCode, exitCode)
  t.regex(error.message, message)
}

test('an index with channels and node inputs parses', (t) => {
  const parsed = parse(index())
  t.deepEqual(parsed.apps.foo.channels, {stable: '1.0.0', canary: '1.1.0'})
  t.is(parsed.nodes!.web1.app, 'foo/channels/stable')
})

test("an entry pointing one node at another node's input is refused (65), whatever its hash says", (t) => {
  const doc = index()
  doc.nodes.db1 = {...doc.nodes.web1}
  refuses(t, () => parse(doc), 65, /node "db1": input path "inputs\/web1\/c{64}\.yaml" is not inputs\/db1\/c{64}\.yaml/)
})

test('an input path that escapes, or does not match its sha256, is refused (65)', (t) => {
  for (const input of ['../index.json', 'inputs/web1/../db1/x.yaml', `/inputs/web1/${'c'.repeat(64)}.yaml`, inputPathFor('web1', 'e'.repeat(64))]) {
    const doc = index()
    doc.nodes.web1.input = input
    refuses(t, () => parse(doc), 65, /node "web1": input path/)
  }
})

test('node names that are not host names, and channels naming unknown tags or bad names, are refused (65)', (t) => {
  for (const name of ['Web1', '../x', 'a/b', '', '-x', 'a..b']) {
    const doc = index()
    doc.nodes[name] = {...doc.nodes.web1, input: inputPathFor(name, 'c'.repeat(64))}
    refuses(t, () => parse(doc), 65, /invalid node name/)
  }

  const unknown = index()
  unknown.apps.foo.channels.stable = '9.9.9'
  refuses(t, () => parse(unknown), 65, /channel "foo\/channels\/stable": names tag "9\.9\.9", which the index does not list/)
  const badName = index()
  badName.apps.foo.channels.Stable = '1.0.0'
  refuses(t, () => parse(badName), 65, /channel "foo\/channels\/Stable": invalid channel name/)
})

test('foo/channels/NAME (and app/foo/channels/NAME) parses as a channel; bad channel names do not', (t) => {
  t.deepEqual(parseReleaseRef('foo/channels/stable'), {kind: 'channel', app: 'foo', channel: 'stable', text: 'foo/channels/stable'})
  t.deepEqual(parseReleaseRef('app/foo/channels/eu-west_1'), {kind: 'channel', app: 'foo', channel: 'eu-west_1', text: 'app/foo/channels/eu-west_1'})
  for (const bad of ['foo/channels/Stable', 'foo/channels/', 'foo/channels/a/b', 'foo/channels/1st']) t.throws(() => parseReleaseRef(bad), undefined, bad)
})

test('a channel resolves to the tag the node last read it naming, exactly and immutably; unread is 66; a manifest naming a channel is 65', async (t) => {
  const dir = await tempDir(t)
  await writeReleases(dir, {'foo/tags/1.0.0': ['dist/tags/2.0.1'], 'foo/tags/1.1.0': ['dist/tags/2.0.1'], 'dist/tags/2.0.1': null, 'bar/tags/1.0.0': ['foo/channels/stable']})
  const real = await realpath(dir)
  const channels = {'foo/channels/stable': '1.0.0', 'foo/channels/canary': '1.1.0'}
  const stable = await resolveRelease(dir, 'foo/channels/stable', {channels})
  t.like(stable.modulepath[0], {ref: 'foo/channels/stable', release: 'foo/tags/1.0.0', kind: 'tag', mutable: false})
  t.deepEqual(
    stable.modulepath.map((entry) => entry.path),
    [join(real, 'foo/tags/1.0.0'), join(real, 'dist/tags/2.0.1')],
  )
  t.is((await resolveRelease(dir, 'foo/channels/canary', {channels})).modulepath[0].release, 'foo/tags/1.1.0')
  await t.throwsAsync(resolveRelease(dir, 'foo/channels/beta', {channels}), {instanceOf: LocalpuppetError, message: /has not read channel beta of foo from a repository yet/})
  t.is(((await resolveRelease(dir, 'foo/channels/beta', {channels}).catch((error) => error)) as LocalpuppetError).exitCode, 66)
  const viaManifest = (await resolveRelease(dir, 'bar/tags/1.0.0', {channels}).catch((error) => error)) as LocalpuppetError
  t.is(viaManifest.exitCode, 65, viaManifest.message)
  t.regex(viaManifest.message, /is a channel; a release's modulepath names tags/)
})

test('publish --node: an input naming trunk or a branch is refused (65); a channel, tag or range the index lacks is 66, before anything is written', async (t) => {
  const dir = await tempDir(t)
  const file = (name: string, app: string) => writeFile(join(dir, `${name}.yaml`), `app: ${app}\nclasses: [foo]\n`).then(() => ({node: name, file: join(dir, `${name}.yaml`)}))
  for (const app of ['foo/trunk', 'foo/branches/x']) {
    const error = (await checkNodeInputs([await file('web1', app)]).catch((e) => e)) as LocalpuppetError
    t.is(error.exitCode, 65, app)
    t.regex(error.message, /a repository holds tags only, so node web1 could never fetch it/)
  }

  const parsed = parse(index())
  for (const [app, why] of [
    ['foo/channels/beta', /has no channel beta of foo/],
    ['foo/tags/2.0.0', /has no tag 2\.0\.0 of foo/],
    ['foo@^3', /no tag of foo in the repository satisfies "\^3"/],
    ['bar/channels/stable', /has no channel stable of bar/],
  ] as const) {
    const checked = await checkNodeInputs([await file('web2', app)])
    const error = (await addNodeInputs(dir, parsed, checked, Date.now).catch((e) => e)) as LocalpuppetError
    t.is(error.exitCode, 66, app)
    t.regex(error.message, why)
    t.false('web2' in parsed.nodes!, 'the index is left as it was')
  }

  const twice = (await checkNodeInputs([await file('web1', 'foo/channels/stable'), await file('web1', 'foo/channels/stable')]).catch((e) => e)) as LocalpuppetError
  t.is(twice.exitCode, 64)
  const badName = (await checkNodeInputs([{node: 'Web_1', file: join(dir, 'web1.yaml')}]).catch((e) => e)) as LocalpuppetError
  t.is(badName.exitCode, 64)
})

test('a file in --inputs DIR whose name holds an escape sequence is refused naming it escaped: nothing reaches the terminal raw', async (t) => {
  const dir = await tempDir(t)
  await writeFile(join(dir, 'we\u001B[2Jb\u202E.yaml'), 'app: foo/tags/1.0.0\n')
  const error = await t.throwsAsync(async () => checkNodeInputs(await nodeInputsIn(dir)), {instanceOf: LocalpuppetError})
  t.is(error!.message, `node name "we\\u001b[2Jb\\u202e" (${dir}/we\\e[2Jb\\u202e.yaml): not a host name (lowercase letters, digits, '.', '-', '_')`)
  t.false(/[\u001B\u202E]/.test(error!.message))
})
