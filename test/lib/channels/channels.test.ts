import {generateKeyPairSync} from 'node:crypto'
import {mkdir, readFile, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import test from 'ava'

import {packRelease} from '../../../src/lib/archive/pack.js'
import {channelBack} from '../../../src/lib/channels/channel-back.js'
import {checkChannelPolicy, setChannelPolicy} from '../../../src/lib/channels/channel-policy.js'
import {channelHistory, listRepository, listServedRepository} from '../../../src/lib/channels/repository-listing.js'
import {yankTag} from '../../../src/lib/channels/yank.js'
import {LocalpuppetError} from '../../../src/lib/errors.js'
import type {ChannelHealth} from '../../../src/lib/fleet/channel-health.js'
import {MAX_CHANNEL_HISTORY} from '../../../src/lib/repository/channel-records.js'
import {promoteChannel} from '../../../src/lib/repository/promote.js'
import {publishArchives} from '../../../src/lib/repository/publish.js'
import {inputPathFor, serializeRepositoryIndex} from '../../../src/lib/repository/repository-index.js'
import {fetchReleases} from '../../../src/lib/source/fetch.js'
import {testServer} from '../../helpers/repository.js'
import {tempDir} from '../../helpers/temp.js'

const SHA = 'c'.repeat(64)
const DIGEST = `sha256:${'d'.repeat(64)}`
const tag = (release: string) => ({archive: 'archives/x.tar.gz', size: 1, sha256: SHA, digest: DIGEST, modulepath: [release], digests: {[release]: DIGEST}, signedBy: null, publishedAt: '2026-11-25T00:00:00.000Z'})
const TAGS = ['1.0.0', '1.1.0', '1.2.0']

/** An unsigned repository with foo 1.0.0, 1.1.0 and 1.2.0 published (real archives: publish checks node inputs against them), and a signing key. */
async function repository(t: any): Promise<{dir: string; repo: string; key: string}> {
  const dir = await tempDir(t)
  const repo = join(dir, 'repo')
  const modules = join(dir, 'released')
  const archives: string[] = []
  for (const name of TAGS) {
    await mkdir(join(modules, 'foo', 'tags', name, 'foo', 'manifests'), {recursive: true})
    await writeFile(join(modules, 'foo', 'tags', name, 'foo', 'manifests', 'init.pp'), 'class foo {}\n')
    archives.push(join(dir, `foo-${name}.tar.gz`))
    await packRelease({moduleDir: modules, ref: `foo/tags/${name}`, output: archives.at(-1)!})
  }

  await publishArchives({repo, archives})
  const key = join(dir, 'key.pem')
  const pair = generateKeyPairSync('ed25519')
  await writeFile(key, pair.privateKey.export({type: 'pkcs8', format: 'pem'}), {mode: 0o600})
  await writeFile(join(dir, 'key.pub.pem'), pair.publicKey.export({type: 'spki', format: 'pem'}))
  return {dir, repo, key}
}

const indexOf = async (repo: string) => JSON.parse(await readFile(join(repo, 'index.json'), 'utf8'))
/** Node inputs listed in the (unsigned) index as publish lists them, by node and app: their files are never read here. */
async function listInputs(repo: string, apps: Record<string, string>): Promise<void> {
  const index = await indexOf(repo)
  index.nodes = Object.fromEntries(Object.entries(apps).map(([node, app]) => [node, {input: inputPathFor(node, SHA), size: 1, sha256: SHA, app, publishedAt: '2026-11-25T00:00:00.000Z'}]))
  await writeFile(join(repo, 'index.json'), serializeRepositoryIndex(index))
}
async function refused(t: any, promise: Promise<unknown>, code: number, pattern: RegExp): Promise<void> {
  const error = (await t.throwsAsync(promise)) as LocalpuppetError
  t.is(error.exitCode, code, error.message)
  t.regex(error.message, pattern)
}

/** A Prometheus gate that answers `ok`, saying which channel it was asked about. */
const health = (ok: boolean) => async (_url: string, options: {channel: string; release: string; forMs: number}): Promise<ChannelHealth> =>
  ({ok, why: ok ? `all 1 nodes following foo/channels/${options.channel} are healthy` : `1 of 1 nodes following foo/channels/${options.channel} are not healthy on ${options.release}: web1 (settling)`, nodes: []}) as unknown as ChannelHealth

test('every promote that moves a channel is recorded in the signed index (from, to, when, by which key); one that does not move it is not', async (t) => {
  const {repo, key} = await repository(t)
  await promoteChannel({repo, release: 'foo/tags/1.0.0', channel: 'stable', signingKey: key, now: () => Date.parse('2026-11-28T01:00:00Z')})
  await promoteChannel({repo, release: 'foo/tags/1.1.0', channel: 'stable', signingKey: key})
  await promoteChannel({repo, release: 'foo/tags/1.1.0', channel: 'stable', signingKey: key})
  const history = await channelHistory(repo, 'foo/channels/stable')
  t.is(history.tag, '1.1.0')
  t.is(history.kept, MAX_CHANNEL_HISTORY)
  t.deepEqual(history.moves.map((move) => [move.action, move.from, move.to]), [['promote', '1.0.0', '1.1.0'], ['promote', null, '1.0.0']], 'newest first')
  t.is(history.moves[1].at, '2026-11-28T01:00:00.000Z')
  t.regex(history.moves[0].by!, /^sha256:[0-9a-f]{64}$/)
  await refused(t, channelHistory(repo, 'foo/channels/canary'), 66, /foo\/channels\/canary: no such channel .*; foo has stable/)
  await refused(t, channelHistory(repo, 'foo/tags/1.0.0'), 64, /name a channel, APP\/channels\/NAME/)
})

test('channel back takes a channel to the tag before its current one, recorded as a back; backs walk down; none left is 66', async (t) => {
  const {repo} = await repository(t)
  for (const name of TAGS) await promoteChannel({repo, release: `foo/tags/${name}`, channel: 'stable'})
  t.like(await channelBack({repo, channel: 'foo/channels/stable'}), {channel: 'foo/channels/stable', from: '1.2.0', to: '1.1.0'})
  t.like(await channelBack({repo, channel: 'foo/channels/stable'}), {from: '1.1.0', to: '1.0.0'})
  t.is((await indexOf(repo)).apps.foo.channels.stable, '1.0.0')
  const before = await readFile(join(repo, 'index.json'))
  await refused(t, channelBack({repo, channel: 'foo/channels/stable'}), 66, /foo\/channels\/stable: its history holds no tag before 1\.0\.0/)
  await refused(t, channelBack({repo, channel: 'foo/channels/canary'}), 66, /foo\/channels\/canary: no such channel/)
  t.deepEqual(await readFile(join(repo, 'index.json')), before, 'a refused back changes nothing')
  const history = await channelHistory(repo, 'foo/channels/stable')
  t.deepEqual(history.moves.slice(0, 2).map((move) => [move.action, move.from, move.to]), [['back', '1.1.0', '1.0.0'], ['back', '1.2.0', '1.1.0']])
})

test('a channel policy is enforced by every promote to the channel: refused with the policy and what was missing; an override moves it and is recorded', async (t) => {
  const {repo} = await repository(t)
  await promoteChannel({repo, release: 'foo/tags/1.0.0', channel: 'canary'})
  await promoteChannel({repo, release: 'foo/tags/1.0.0', channel: 'stable'})
  // A policy naming a channel the app does not have is refused at once (a typo would shut stable for good).
  await refused(t, setChannelPolicy({repo, channel: 'foo/channels/stable', policy: {requireHealthy: 'canry', forMs: 0, minNodes: 1}}), 66, /--require-healthy canry: foo has no channel canry .* \(did you mean canary\?\); it has canary, stable/)
  await refused(t, setChannelPolicy({repo, channel: 'foo/channels/stable', policy: {requireHealthy: 'stable', forMs: 0, minNodes: 1}}), 64, /names another channel/)
  await setChannelPolicy({repo, channel: 'foo/channels/stable', policy: {requireHealthy: 'canary', forMs: 1_800_000, minNodes: 1}})

  const check = (override?: string, ok = false) =>
    checkChannelPolicy({repo, app: 'foo', tag: '1.1.0', channel: 'stable', prometheus: 'http://prometheus:9090', override, channelHealth: health(ok) as any})
  const shut = await check()
  t.like(shut, {met: false})
  t.is((shut as {why: string}).why, 'policy of foo/channels/stable (healthy on canary for 30m, at least 1 node) not met: 1 of 1 nodes following foo/channels/canary are not healthy on foo/tags/1.1.0: web1 (settling)')
  await refused(t, checkChannelPolicy({repo, app: 'foo', tag: '1.1.0', channel: 'stable', prometheus: null}), 64, /foo\/channels\/stable has a policy \(healthy on canary for 30m, at least 1 node\): promote needs --prometheus/)
  // promote without having judged the policy is refused under the lock: no caller skips it.
  await refused(t, promoteChannel({repo, release: 'foo/tags/1.1.0', channel: 'stable'}), 73, /its policy \(healthy on canary for 30m, at least 1 node\) was not checked/)
  t.like(await promoteChannel({repo, release: 'foo/tags/1.1.0', channel: 'stable', policy: await check(undefined, true)}), {moved: true})

  const override = await check('canary nodes down for maintenance')
  t.deepEqual(override, {policy: (override as any).policy, override: 'canary nodes down for maintenance'})
  await promoteChannel({repo, release: 'foo/tags/1.2.0', channel: 'stable', policy: override})
  t.deepEqual((await channelHistory(repo, 'foo/channels/stable')).moves[0].override, {reason: 'canary nodes down for maintenance', policy: 'healthy on canary for 30m, at least 1 node'})
  await refused(t, check('   '), 64, /--override-policy: give a reason/)
  await refused(t, checkChannelPolicy({repo, app: 'foo', tag: '1.1.0', channel: 'canary', prometheus: null, override: 'x'}), 64, /foo\/channels\/canary has no policy to override/)

  // The policy changed between the check and the lock: nothing moves (73).
  const judged = await check(undefined, true)
  await setChannelPolicy({repo, channel: 'foo/channels/stable', policy: {requireHealthy: 'canary', forMs: 3_600_000, minNodes: 2}})
  await refused(t, promoteChannel({repo, release: 'foo/tags/1.0.0', channel: 'stable', policy: judged}), 73, /changed while promote checked it/)
  t.is((await indexOf(repo)).apps.foo.channels.stable, '1.2.0')
  t.like((await listRepository(repo)).apps[0].channels.find((channel) => channel.channel === 'stable'), {tag: '1.2.0', policy: {requireHealthy: 'canary', forMs: 3_600_000, minNodes: 2}, moves: 3})
  await setChannelPolicy({repo, channel: 'foo/channels/stable', policy: null})
  t.like(await checkChannelPolicy({repo, app: 'foo', tag: '1.0.0', channel: 'stable', prometheus: null}), {policy: null})
})

test('a yanked tag stays listed with when and why; no channel, back or node input may name it; a range skips it; a node does not install it', async (t) => {
  const {dir, repo} = await repository(t)
  await promoteChannel({repo, release: 'foo/tags/1.1.0', channel: 'stable'})
  await promoteChannel({repo, release: 'foo/tags/1.2.0', channel: 'stable'})
  // The inputs as publish lists them (publish itself validates them against archives this index has not got; a yank reads only the index).
  await listInputs(repo, {web1: 'foo/tags/1.1.0', web2: 'foo@^1'})
  // Named by a channel or an input: refused, naming them.
  await refused(t, yankTag({repo, release: 'foo/tags/1.2.0', reason: 'breaks nginx'}), 73, /foo\/tags\/1\.2\.0 is not yanked: foo\/channels\/stable names it/)
  await refused(t, yankTag({repo, release: 'foo/tags/1.1.0', reason: 'breaks nginx'}), 73, /foo\/tags\/1\.1\.0 is not yanked: node web1's input names it/)
  await refused(t, yankTag({repo, release: 'foo/tags/1.1.0', reason: 'line one\nline two'}), 64, /one line of text/)
  await refused(t, yankTag({repo, release: 'foo@^1', reason: 'x'}), 64, /name an exact tag/)

  await listInputs(repo, {web1: 'foo/channels/stable', web2: 'foo@^1'})
  const yanked = await yankTag({repo, release: 'foo/tags/1.1.0', reason: 'breaks nginx', now: () => Date.parse('2026-11-28T02:00:00Z')})
  t.deepEqual(yanked.yanked, {at: '2026-11-28T02:00:00.000Z', reason: 'breaks nginx', by: null})
  t.like(await yankTag({repo, release: 'foo/tags/1.1.0', reason: 'again'}), {changed: false, yanked: {reason: 'breaks nginx'}})
  t.like((await listRepository(repo)).apps[0].tags.find((listed) => listed.tag === '1.1.0'), {yanked: {reason: 'breaks nginx'}})

  await refused(t, promoteChannel({repo, release: 'foo/tags/1.1.0', channel: 'canary'}), 66, /foo\/channels\/canary not moved: foo\/tags\/1\.1\.0 is yanked \(2026-11-28T02:00:00\.000Z: breaks nginx\)/)
  await refused(t, channelBack({repo, channel: 'foo/channels/stable'}), 66, /foo\/channels\/stable not moved back: foo\/tags\/1\.1\.0 is yanked/)
  await writeFile(join(dir, 'web3.yaml'), 'app: foo/tags/1.1.0\n')
  await refused(t, publishArchives({repo, archives: [], nodes: [{node: 'web3', file: join(dir, 'web3.yaml')}]}), 66, /node web3's app foo\/tags\/1\.1\.0: foo\/tags\/1\.1\.0 is yanked .*; a node would not install it/)

  // A node: the exact tag is refused before any download (66), naming the yank; a range resolves past it.
  const moduleDir = join(dir, 'modules')
  await mkdir(moduleDir)
  await refused(t, fetchReleases(repo, ['foo/tags/1.1.0'], {moduleDir, trust: [], trustDir: null}), 66, /^foo\/tags\/1\.1\.0 is yanked \(2026-11-28T02:00:00\.000Z: breaks nginx\) in the repository .*: not installed$/)
  await refused(t, fetchReleases(repo, ['foo@~1.1'], {moduleDir, trust: [], trustDir: null}), 66, /it has 1\.2\.0, 1\.1\.0 \(yanked\), 1\.0\.0/)
})

test('repository list: tags newest first, channels with tag, policy and moves, node inputs, and the index\'s version, expiry, id and key', async (t) => {
  const {repo, key} = await repository(t)
  await promoteChannel({repo, release: 'foo/tags/1.0.0', channel: 'canary', signingKey: key})
  const listing = await listRepository(repo)
  t.like(listing, {version: 2, expired: false, nodes: []})
  t.regex(listing.repository!, /^[0-9a-f]{32}$/)
  t.regex(listing.signedBy!, /^sha256:[0-9a-f]{64}$/)
  t.is(listing.signature, 'named', 'as index.json.sig names it: not verified from the publisher\'s copy')
  t.deepEqual(listing.apps[0].tags.map((listed) => listed.tag), ['1.2.0', '1.1.0', '1.0.0'])
  t.deepEqual(listing.apps[0].channels, [{channel: 'canary', tag: '1.0.0', policy: null, moves: 1}])
  // A policy on a channel that does not exist yet is listed, so a typo shows.
  const doc = await indexOf(repo)
  doc.apps.foo.policies = {stable: {requireHealthy: 'canary', forMs: 0, minNodes: 1, setAt: '2026-11-28T00:00:00.000Z', setBy: null}}
  doc.nodes = {web1: {input: inputPathFor('web1', SHA), size: 1, sha256: SHA, app: 'foo/channels/canary', publishedAt: '2026-11-28T00:00:00.000Z'}}
  await writeFile(join(repo, 'index.json'), JSON.stringify(doc))
  const again = await listRepository(repo)
  t.deepEqual(again.apps[0].orphanPolicies.map((orphan) => orphan.channel), ['stable'])
  t.deepEqual(again.nodes, [{node: 'web1', app: 'foo/channels/canary', publishedAt: '2026-11-28T00:00:00.000Z'}])
  await refused(t, listRepository(join(repo, 'nothing')), 66, /no release repository at/)
})

test('an index written by a publisher older than versions and histories is listed and its channels read as having no moves; the next promote starts the history', async (t) => {
  const {repo} = await repository(t)
  await writeFile(join(repo, 'index.json'), serializeRepositoryIndex({format: 1, apps: {foo: {tags: {'1.0.0': tag('foo/tags/1.0.0'), '1.1.0': tag('foo/tags/1.1.0')}, channels: {stable: '1.0.0'}}}}))
  t.like(await listRepository(repo), {repository: null, version: null, expires: null, expired: false, signedBy: null, signature: 'unsigned'})
  t.deepEqual((await channelHistory(repo, 'foo/channels/stable')).moves, [])
  await refused(t, channelBack({repo, channel: 'foo/channels/stable'}), 66, /its history holds no tag before 1\.0\.0/)
  await promoteChannel({repo, release: 'foo/tags/1.1.0', channel: 'stable'})
  t.like(await channelBack({repo, channel: 'foo/channels/stable'}), {from: '1.1.0', to: '1.0.0'})
})

test('a channel or tag argument that is not one is 64 naming it; a history entry that does not read stops promote, back, policy and yank (65 naming it), nothing written', async (t) => {
  const {repo} = await repository(t)
  await refused(t, channelHistory(repo, 'foo/channels/Stable'), 64, /invalid channel name "Stable"/)
  await refused(t, yankTag({repo, release: 'foo/tags/../../x', reason: 'x'}), 64, /foo\/tags\/\.\.\/\.\.\/x/)
  await promoteChannel({repo, release: 'foo/tags/1.0.0', channel: 'stable'})
  const doc = await indexOf(repo)
  doc.apps.foo.history.stable.push({at: '2026-11-28T00:00:00.000Z', action: 'promote', from: '1.0.0', to: '../../etc', by: null})
  await writeFile(join(repo, 'index.json'), JSON.stringify(doc))
  const before = await readFile(join(repo, 'index.json'))
  const damaged = /index\.json: apps\.foo\.history\.stable\[1\]: to "\.\.\/\.\.\/etc" is not a tag/
  await refused(t, promoteChannel({repo, release: 'foo/tags/1.1.0', channel: 'stable'}), 65, damaged)
  await refused(t, channelBack({repo, channel: 'foo/channels/stable'}), 65, damaged)
  await refused(t, setChannelPolicy({repo, channel: 'foo/channels/canary', policy: null}), 65, damaged)
  await refused(t, yankTag({repo, release: 'foo/tags/1.2.0', reason: 'x'}), 65, damaged)
  await refused(t, channelHistory(repo, 'foo/channels/stable'), 65, damaged)
  t.deepEqual(await readFile(join(repo, 'index.json')), before)
})

test('repository list --source reads the repository as a node does: the key that verified it, a key that does not is 65, no key is "not checked"', async (t) => {
  const {dir, repo, key} = await repository(t)
  await promoteChannel({repo, release: 'foo/tags/1.0.0', channel: 'canary', signingKey: key})
  const listing = await listServedRepository({source: repo, trust: [join(dir, 'key.pub.pem')]})
  t.like(listing, {repo, signature: 'verified', version: 2})
  t.is(listing.signedBy, (await listRepository(repo)).signedBy)
  t.like(await listServedRepository({source: repo, trust: []}), {signature: 'not checked', signedBy: null})
  const other = join(dir, 'other.pub.pem')
  await writeFile(other, generateKeyPairSync('ed25519').publicKey.export({type: 'spki', format: 'pem'}))
  await refused(t, listServedRepository({source: repo, trust: [other]}), 65, /does not verify with any trusted key/)
})

test('a yank that would leave a node input\'s range with no tag to take is refused (73 naming the node), as one named exactly is: the node would refuse every run', async (t) => {
  const {repo} = await repository(t)
  await listInputs(repo, {web1: 'foo@~1.1', web2: 'foo@^1'})
  const before = await readFile(join(repo, 'index.json'))
  await refused(t, yankTag({repo, release: 'foo/tags/1.1.0', reason: 'breaks nginx'}), 73, /foo\/tags\/1\.1\.0 is not yanked: node web1's input \(foo@~1\.1\) would have no tag left/)
  t.deepEqual(await readFile(join(repo, 'index.json')), before, 'nothing written')
  // web2's range has other tags: the yank goes through, and web2 takes the newest that is not yanked.
  t.like(await yankTag({repo, release: 'foo/tags/1.2.0', reason: 'breaks nginx'}), {changed: true})
})

test('a channel policy that would close a loop of policies (stable needs canary, canary needs beta, beta needs stable) is refused (64 naming the loop), nothing written: no new tag could reach any of them without an override', async (t) => {
  const {repo} = await repository(t)
  for (const channel of ['beta', 'canary', 'stable']) await promoteChannel({repo, release: 'foo/tags/1.0.0', channel})
  await setChannelPolicy({repo, channel: 'foo/channels/stable', policy: {requireHealthy: 'canary', forMs: 0, minNodes: 1}})
  await setChannelPolicy({repo, channel: 'foo/channels/canary', policy: {requireHealthy: 'beta', forMs: 0, minNodes: 1}})
  const before = await readFile(join(repo, 'index.json'))
  await refused(t, setChannelPolicy({repo, channel: 'foo/channels/beta', policy: {requireHealthy: 'stable', forMs: 0, minNodes: 1}}), 64, /beta -> stable -> canary -> beta/)
  t.deepEqual(await readFile(join(repo, 'index.json')), before, 'nothing written')
  // Once canary no longer needs beta, the same policy closes no loop.
  await setChannelPolicy({repo, channel: 'foo/channels/canary', policy: null})
  t.like(await setChannelPolicy({repo, channel: 'foo/channels/beta', policy: {requireHealthy: 'stable', forMs: 0, minNodes: 1}}), {policy: {requireHealthy: 'stable'}})
})

test('repository list --source http://user:pass@host lists the repository without the credentials (--json keeps URLs without them, as everywhere)', async (t) => {
  const {dir, repo, key} = await repository(t)
  await promoteChannel({repo, release: 'foo/tags/1.0.0', channel: 'canary', signingKey: key})
  const server = await testServer(repo)
  t.teardown(() => server.close())
  const listing = await listServedRepository({source: `http://ops:s3cret@127.0.0.1:${server.port}/`, trust: [join(dir, 'key.pub.pem')]})
  t.like(listing, {signature: 'verified', version: 2})
  t.is(listing.repo, `http://127.0.0.1:${server.port}/`)
  t.notRegex(JSON.stringify(listing), /s3cret/)
})

test('a policy the index could not read back (--for over a year, --min-nodes over a million) is refused (64) before it is written: written, it stopped every promote, back, policy and yank of the repository (65), --clear included', async (t) => {
  const {repo} = await repository(t)
  for (const channel of ['canary', 'stable']) await promoteChannel({repo, release: 'foo/tags/1.0.0', channel})
  const before = await readFile(join(repo, 'index.json'))
  await refused(t, setChannelPolicy({repo, channel: 'foo/channels/stable', policy: {requireHealthy: 'canary', forMs: 400 * 86_400_000, minNodes: 1}}), 64, /--for: 400d is longer than a year/)
  await refused(t, setChannelPolicy({repo, channel: 'foo/channels/stable', policy: {requireHealthy: 'canary', forMs: 0, minNodes: 2_000_000}}), 64, /--min-nodes: 2000000 is more than 1000000/)
  t.deepEqual(await readFile(join(repo, 'index.json')), before, 'nothing written')
  await setChannelPolicy({repo, channel: 'foo/channels/stable', policy: {requireHealthy: 'canary', forMs: 366 * 86_400_000, minNodes: 1_000_000}})
  t.like(await channelHistory(repo, 'foo/channels/stable'), {policy: {minNodes: 1_000_000}})
})

test('a yank or override reason that would reorder or hide text in a terminal (a bidi override, a line separator, a zero-width space) is refused (64) as a newline is, nothing written', async (t) => {
  const {repo} = await repository(t)
  const before = await readFile(join(repo, 'index.json'))
  for (const reason of ['fixed in \u202E0.2.1 ', 'one\u2028two', 'safe\u200B']) {
    await refused(t, yankTag({repo, release: 'foo/tags/1.1.0', reason}), 64, /--reason: the reason must be one line of text, without control characters or invisible formatting characters \(.*\\u(202e|2028|200b)/)
  }

  t.deepEqual(await readFile(join(repo, 'index.json')), before, 'nothing written')
  t.like(await yankTag({repo, release: 'foo/tags/1.1.0', reason: 'casse nginx — «port 8080»'}), {yanked: {reason: 'casse nginx — «port 8080»'}})
})
