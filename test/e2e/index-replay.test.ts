import {existsSync} from 'node:fs'
import {copyFile, mkdir, readFile, readdir, rm, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import test, {type ExecutionContext} from 'ava'

import {FAKE_PUPPET, cli} from '../helpers/cli.js'
import {startNginx} from '../helpers/nginx.js'
import {testNeeding} from '../helpers/packages.js'
import {DEMO_MODULES, keyPair} from '../helpers/repository.js'
import {tempDir} from '../helpers/temp.js'
import {loadSigningKey, signIndex} from '../../src/lib/archive/signature.js'

const nginxTest = await testNeeding(['nginx-light'])

interface Replay {
  dir: string
  repo: string
  key: string
  pub: string
  modules: string
  /** index.json and index.json.sig as they were after publishing foo 1.3.0 alone (version 1). */
  old: {index: string; sig: string}
}

/** foo 1.3.0 published (signed; the attacker keeps a copy of the index), then 1.4.0. */
async function replayScenario(t: ExecutionContext): Promise<Replay> {
  const dir = await tempDir(t)
  const {key, pub} = await keyPair(dir, 'release')
  const repo = join(dir, 'repo')
  const old = {index: join(dir, 'old.json'), sig: join(dir, 'old.sig')}
  for (const tag of ['1.3.0', '1.4.0']) {
    const archive = join(dir, `foo-${tag}.tar.gz`)
    const packed = await cli(['pack', `foo/tags/${tag}`, '--module-dir', DEMO_MODULES, '-o', archive, '--sign', key])
    t.is(packed.exitCode, 0, packed.stderr)
    const published = await cli(['publish', archive, '--repo', repo, '--sign', key])
    t.is(published.exitCode, 0, published.stderr)
    if (tag === '1.3.0') {
      await copyFile(join(repo, 'index.json'), old.index)
      await copyFile(join(repo, 'index.json.sig'), old.sig)
    }
  }

  const modules = join(dir, 'modules')
  await mkdir(modules)
  return {dir, repo, key, pub, modules, old}
}

async function restoreOld(s: Replay): Promise<void> {
  await copyFile(s.old.index, join(s.repo, 'index.json'))
  await copyFile(s.old.sig, join(s.repo, 'index.json.sig'))
}

/** Every file and directory under the module dir except the memory file itself, with its content, to show nothing changed. */
async function snapshot(dir: string): Promise<Record<string, string>> {
  const entries = await readdir(dir, {recursive: true, withFileTypes: true})
  const out: Record<string, string> = {}
  for (const entry of entries) {
    const path = join(entry.parentPath, entry.name)
    if (/\.localpuppet\/(downloads|repositories\.(json|lock))/.test(path)) continue
    out[path] = entry.isFile() ? await readFile(path, 'utf8') : entry.isDirectory() ? 'dir' : 'other'
  }

  return out
}

async function replayIsRefused(t: ExecutionContext, s: Replay, source: string): Promise<void> {
  const fetched = await cli(['fetch', 'foo@^1.3', '--source', source, '--trust', s.pub, '--module-dir', s.modules, '--json'])
  t.is(fetched.exitCode, 0, fetched.stderr)
  const result = JSON.parse(fetched.stdout)
  t.like(result, {releases: [{release: 'foo/tags/1.4.0', status: 'installed'}], indexVersion: 2, warnings: []})
  t.is(result.indexExpires, JSON.parse(await readFile(join(s.repo, 'index.json'), 'utf8')).expires)
  // A warm fetch of the same index: the same version is fine.
  t.is((await cli(['fetch', 'foo@^1.3', '--source', source, '--trust', s.pub, '--module-dir', s.modules])).exitCode, 0)

  const before = await snapshot(s.modules)
  await restoreOld(s)
  const replayed = await cli(['fetch', 'foo@^1.3', '--source', source, '--trust', s.pub, '--module-dir', s.modules])
  t.is(replayed.exitCode, 65, replayed.stderr)
  const label = source.startsWith('http') ? `${source}/` : source
  t.is(replayed.stderr.split('\n')[0], `localpuppet: index version 1 of ${label} is older than version 2 already accepted from it: a replay (rollback attack)?`)
  t.deepEqual(await snapshot(s.modules), before, 'nothing new in the module dir')
  t.deepEqual(await readdir(join(s.modules, 'foo', 'tags')), ['1.4.0'])
  // An exact tag the old index also names is refused the same way: the index is judged before anything is resolved.
  const exact = await cli(['fetch', 'foo/tags/1.3.0', '--source', source, '--trust', s.pub, '--module-dir', s.modules])
  t.is(exact.exitCode, 65, exact.stderr)
  t.deepEqual(await snapshot(s.modules), before)
}

test('a replayed (older, properly signed) index from a directory repository is refused (65) naming both versions, and nothing is installed', async (t) => {
  const s = await replayScenario(t)
  await replayIsRefused(t, s, s.repo)
})

nginxTest('a replayed index served over http by nginx is refused (65) naming both versions, and nothing is installed', async (t) => {
  const s = await replayScenario(t)
  const nginx = await startNginx(s.repo, join(s.dir, 'nginx'))
  t.teardown(() => nginx.stop())
  await replayIsRefused(t, s, nginx.url)
})

/** The repository's index rewritten (version, expiry as given) and signed with the publisher's key, by the code publish uses. */
async function resign(s: Replay, change: (index: any) => void): Promise<void> {
  const index = JSON.parse(await readFile(join(s.repo, 'index.json'), 'utf8'))
  change(index)
  const bytes = Buffer.from(JSON.stringify(index, null, 1) + '\n')
  await writeFile(join(s.repo, 'index.json.sig'), signIndex(bytes, await loadSigningKey(s.key)))
  await writeFile(join(s.repo, 'index.json'), bytes)
}

test('an expired index is refused (65) naming the date, even a version never seen before; publish with no archive renews it', async (t) => {
  const s = await replayScenario(t)
  const expires = '2026-01-01T00:00:00.000Z'
  await resign(s, (index) => Object.assign(index, {version: 9, expires}))
  const expired = await cli(['fetch', 'foo@^1.3', '--source', s.repo, '--trust', s.pub, '--module-dir', s.modules])
  t.is(expired.exitCode, 65, expired.stderr)
  t.regex(expired.stderr, new RegExp(`^localpuppet: index version 9 of ${s.repo} expired at ${expires}: .*freeze attack`))
  t.deepEqual((await readdir(s.modules)).filter((name) => !name.startsWith('.')), [], 'nothing installed')

  // The publisher re-signs (no archive): version 10, a fresh expiry, the same tags.
  const resigned = await cli(['publish', '--repo', s.repo, '--sign', s.key, '--json'])
  t.is(resigned.exitCode, 0, resigned.stderr)
  const result = JSON.parse(resigned.stdout)
  t.like(result, {releases: [], version: 10})
  t.true(Date.parse(result.expires) > Date.now() + 29 * 86_400_000)
  const index = JSON.parse(await readFile(join(s.repo, 'index.json'), 'utf8'))
  t.deepEqual(Object.keys(index.apps.foo.tags), ['1.3.0', '1.4.0'])
  const fetched = await cli(['fetch', 'foo@^1.3', '--source', s.repo, '--trust', s.pub, '--module-dir', s.modules, '--json'])
  t.is(fetched.exitCode, 0, fetched.stderr)
  t.like(JSON.parse(fetched.stdout), {indexVersion: 10, releases: [{release: 'foo/tags/1.4.0', status: 'installed'}]})

  // --expires: a short one lapses.
  const short = await cli(['publish', '--repo', s.repo, '--sign', s.key, '--expires', '1s'])
  t.is(short.exitCode, 0, short.stderr)
  t.regex(short.stdout, /^repository [0-9a-f]{32}, index version 11, expires \S+, signed by sha256:\w+$/)
  await new Promise((done) => setTimeout(done, 1500))
  const lapsed = await cli(['fetch', 'foo@^1.3', '--source', s.repo, '--trust', s.pub, '--module-dir', s.modules])
  t.is(lapsed.exitCode, 65, lapsed.stderr)
  t.regex(lapsed.stderr, /^localpuppet: index version 11 of .* expired at /)

  const bad = await cli(['publish', '--repo', s.repo, '--sign', s.key, '--expires', 'soon'])
  t.is(bad.exitCode, 64, bad.stderr)
  const nothing = await cli(['publish', '--repo', join(s.dir, 'typo')])
  t.is(nothing.exitCode, 64, nothing.stderr)
  t.regex(nothing.stderr, /nothing to publish: no archives given, and .*typo has no index\.json to re-sign/)
})

test('issue 35: an index a day from expiry warns (publish, fetch, apply) and is a metric and a WARNING; once expired the node takes nothing new from it but keeps enforcing its installed release', async (t) => {
  const s = await replayScenario(t)
  const state = join(s.dir, 'state')
  const metrics = join(s.dir, 'localpuppet.prom')
  const fake = join(s.dir, 'fake')
  await mkdir(fake)
  const input = join(s.dir, 'input.yaml')
  await writeFile(input, 'app: foo@^1.3\nclasses: [foo, platform]\n')
  const apply = () =>
    cli(['apply', input, '--fetch', '--source', s.repo, '--trust', s.pub, '--module-dir', s.modules, '--state-dir', state, '--puppet', FAKE_PUPPET, '--metrics-file', metrics], {
      env: {FAKE_PUPPET_DIR: fake, FAKE_PUPPET_SLEEP: '0'},
    })
  const check = () => cli(['status', '--check', '--state-dir', state])
  const gauge = async () => /^localpuppet_index_expiry_timestamp_seconds (\S+)$/m.exec(await readFile(metrics, 'utf8'))?.[1]

  // The index as the node first sees it names only 1.3.0 and has one day left.
  await copyFile(join(s.repo, 'index.json'), join(s.dir, 'current.json'))
  await restoreOld(s)
  const soon = new Date(Date.now() + 86_400_000).toISOString()
  await resign(s, (index) => Object.assign(index, {version: 3, expires: soon}))
  const fetched = await cli(['fetch', 'foo@^1.3', '--source', s.repo, '--trust', s.pub, '--module-dir', s.modules])
  t.is(fetched.exitCode, 0, fetched.stderr)
  t.regex(fetched.stderr, new RegExp(`^localpuppet: warning: index version 3 of ${s.repo} expires at ${soon}, in (?:1d|23h\\d+m): then nodes take nothing new`, 'm'))
  const ahead = await apply()
  t.is(ahead.exitCode, 0, ahead.stderr)
  t.regex(ahead.stderr, /warning: --fetch: index version 3 of .* expires at /)
  t.is(await gauge(), String(Date.parse(soon) / 1000))
  const warned = await check()
  t.is(warned.exitCode, 1, warned.stdout)
  t.regex(warned.stdout, new RegExp(`^LOCALPUPPET WARNING - index of ${s.repo} expires at ${soon}, in (?:1d|23h\\d+m): then nodes take nothing new from it`))

  // The re-signing timer publishes 1.4.0 with one day left: publish warns.
  await copyFile(join(s.dir, 'current.json'), join(s.repo, 'index.json'))
  const published = await cli(['publish', '--repo', s.repo, '--sign', s.key, '--expires', '1d'])
  t.is(published.exitCode, 0, published.stderr)
  t.regex(published.stderr, /^localpuppet: warning: index version 3 of .* expires at \S+, in 1d: then nodes take nothing new from it; re-sign it/m)
  // It lapses before the node fetched it: 1.4.0, new to the node, is not taken from an expired index.
  const expires = '2026-01-01T00:00:00.000Z'
  await resign(s, (index) => Object.assign(index, {version: 9, expires}))
  await rm(join(fake, 'args'))
  const expired = await apply()
  t.is(expired.exitCode, 0, expired.stderr)
  t.regex(expired.stderr, new RegExp(`^localpuppet: warning: --fetch: index version 9 of ${s.repo} expired at ${expires}: .*freeze attack.*: nothing new is taken from it; applying foo/tags/1.3.0 as installed here \\(verified\\)$`, 'm'))
  t.true(existsSync(join(fake, 'args')), 'puppet enforced the installed release')
  t.deepEqual(await readdir(join(s.modules, 'foo', 'tags')), ['1.3.0'], '1.4.0 from the expired index was not installed')
  t.is(await gauge(), String(Date.parse(expires) / 1000))
  t.regex(await readFile(metrics, 'utf8'), /^localpuppet_fetch_failed 1$/m)
  const critical = await check()
  t.is(critical.exitCode, 2, critical.stdout)
  t.regex(critical.stdout, new RegExp(`^LOCALPUPPET CRITICAL - index of ${s.repo} expired at ${expires}: nodes take nothing new from it \\(they enforce what they have installed\\)`))
  // fetch itself still refuses it (65): nothing new from an expired index.
  const refused = await cli(['fetch', 'foo@^1.3', '--source', s.repo, '--trust', s.pub, '--module-dir', s.modules])
  t.is(refused.exitCode, 65, refused.stderr)
})

test('an index without version (an older publisher): accepted with a warning the first time, then quietly; refused (65) once a versioned index was accepted', async (t) => {
  const s = await replayScenario(t)
  await resign(s, (index) => {
    delete index.version
    delete index.expires
  })
  await copyFile(join(s.repo, 'index.json'), join(s.dir, 'unversioned.json'))
  await copyFile(join(s.repo, 'index.json.sig'), join(s.dir, 'unversioned.sig'))
  const first = await cli(['fetch', 'foo/tags/1.3.0', '--source', s.repo, '--trust', s.pub, '--module-dir', s.modules, '--json'])
  t.is(first.exitCode, 0, first.stderr)
  t.regex(first.stderr, /^localpuppet: warning: index of .* has no version or expiry \(published by an older localpuppet\)/)
  t.like(JSON.parse(first.stdout), {indexVersion: null, indexExpires: null})
  const second = await cli(['fetch', 'foo/tags/1.3.0', '--source', s.repo, '--trust', s.pub, '--module-dir', s.modules])
  t.is(second.exitCode, 0, second.stderr)
  t.is(second.stderr, '')

  // The publisher upgrades: the next index is versioned (1, from an index without a version).
  t.is((await cli(['publish', '--repo', s.repo, '--sign', s.key])).exitCode, 0)
  const versioned = await cli(['fetch', 'foo@^1.3', '--source', s.repo, '--trust', s.pub, '--module-dir', s.modules, '--json'])
  t.is(versioned.exitCode, 0, versioned.stderr)
  t.like(JSON.parse(versioned.stdout), {indexVersion: 1})

  const before = await snapshot(s.modules)
  await copyFile(join(s.dir, 'unversioned.json'), join(s.repo, 'index.json'))
  await copyFile(join(s.dir, 'unversioned.sig'), join(s.repo, 'index.json.sig'))
  const replayed = await cli(['fetch', 'foo@^1.3', '--source', s.repo, '--trust', s.pub, '--module-dir', s.modules])
  t.is(replayed.exitCode, 65, replayed.stderr)
  t.regex(replayed.stderr, /^localpuppet: index of .* has no version \(made by an older localpuppet\), but version 1 was already accepted from it: a replay \(rollback attack\)\?/)
  t.deepEqual(await snapshot(s.modules), before)
})

test('unsigned (no trusted key): version and expiry are still checked', async (t) => {
  const s = await replayScenario(t)
  t.is((await cli(['fetch', 'foo@^1.3', '--source', s.repo, '--module-dir', s.modules])).exitCode, 0)
  await restoreOld(s)
  const replayed = await cli(['fetch', 'foo@^1.3', '--source', s.repo, '--module-dir', s.modules])
  t.is(replayed.exitCode, 65, replayed.stderr)
  t.regex(replayed.stderr, /index version 1 of .* is older than version 2 already accepted from it/)
})

test('apply --fetch: the run record names the index version; a replayed index is a refusal (65), never a fallback to what is installed', async (t) => {
  const s = await replayScenario(t)
  const state = join(s.dir, 'state')
  const fake = join(s.dir, 'fake')
  await mkdir(fake)
  const input = join(s.dir, 'input.yaml')
  await writeFile(input, 'app: foo@^1.3\nclasses: [foo, platform]\n')
  const apply = (...extra: string[]) =>
    cli(['apply', input, '--fetch', '--source', s.repo, '--trust', s.pub, '--module-dir', s.modules, '--state-dir', state, '--puppet', FAKE_PUPPET, ...extra], {
      env: {FAKE_PUPPET_DIR: fake, FAKE_PUPPET_SLEEP: '0'},
    })
  const first = await apply('--json')
  t.is(first.exitCode, 0, first.stderr)
  const record = JSON.parse(first.stdout)
  const expires = JSON.parse(await readFile(join(s.repo, 'index.json'), 'utf8')).expires
  t.like(record, {state: 'succeeded', release: 'foo/tags/1.4.0', fetch: {source: s.repo, indexVersion: 2, indexExpires: expires, releases: [{release: 'foo/tags/1.4.0', status: 'installed'}]}})
  await rm(join(fake, 'args'))

  await restoreOld(s)
  const replayed = await apply()
  t.is(replayed.exitCode, 65, replayed.stderr)
  t.regex(replayed.stderr, /index version 1 of .* is older than version 2 already accepted from it: a replay \(rollback attack\)\?/)
  t.notRegex(replayed.stderr, /as installed here/)
  t.false(existsSync(join(fake, 'args')), 'puppet did not run')
  t.deepEqual(await readdir(join(s.modules, 'foo', 'tags')), ['1.4.0'])
})

test('a channel rides on the same index: a replayed older index (one naming another tag for it) is refused and installs nothing', async (t) => {
  const s = await replayScenario(t)
  t.is((await cli(['promote', 'foo/tags/1.3.0', '--channel', 'stable', '--repo', s.repo, '--sign', s.key])).exitCode, 0)
  await writeFile(join(s.dir, 'web1.yaml'), 'app: foo/channels/stable\n')
  t.is((await cli(['publish', '--node', 'web1', '--input', join(s.dir, 'web1.yaml'), '--repo', s.repo, '--sign', s.key])).exitCode, 0)
  // The attacker keeps this index: stable names 1.3.0.
  await copyFile(join(s.repo, 'index.json'), s.old.index)
  await copyFile(join(s.repo, 'index.json.sig'), s.old.sig)
  t.is((await cli(['promote', 'foo/tags/1.4.0', '--channel', 'stable', '--repo', s.repo, '--sign', s.key])).exitCode, 0)
  const fetch = () => cli(['fetch', 'foo/channels/stable', '--source', s.repo, '--trust', s.pub, '--module-dir', s.modules, '--json'])
  const first = await fetch()
  t.is(first.exitCode, 0, first.stderr)
  t.is(JSON.parse(first.stdout).releases[0].release, 'foo/tags/1.4.0')
  await restoreOld(s)
  const replayed = await fetch()
  t.is(replayed.exitCode, 65, replayed.stdout)
  t.regex(JSON.parse(replayed.stdout).error.message, /index version \d+ of .* is older than version \d+ already accepted from it: a replay/)
  t.false(existsSync(join(s.modules, 'foo', 'tags', '1.3.0')), 'the replayed channel installed nothing')
})

test('a key rotation continues the same versions: an index signed by the retired key (still trusted) below what the new key signed is a replay (65)', async (t) => {
  const s = await replayScenario(t)
  const rotated = await keyPair(s.dir, 'rotated')
  // The publisher re-signs with its new key: version 3. Nodes trust both keys for a while.
  t.is((await cli(['publish', '--repo', s.repo, '--sign', rotated.key])).exitCode, 0)
  const fetch = () => cli(['fetch', 'foo@^1.3', '--source', s.repo, '--trust', s.pub, '--trust', rotated.pub, '--module-dir', s.modules, '--json'])
  const first = await fetch()
  t.is(first.exitCode, 0, first.stderr)
  t.like(JSON.parse(first.stdout), {indexVersion: 3, releases: [{release: 'foo/tags/1.4.0', status: 'installed'}]})
  const before = await snapshot(s.modules)
  // The attacker's copy: version 1, signed by the retired key.
  await restoreOld(s)
  const replayed = await fetch()
  t.is(replayed.exitCode, 65, replayed.stdout)
  t.is(JSON.parse(replayed.stdout).error.message, `index version 1 of ${s.repo} is older than version 3 already accepted from it: a replay (rollback attack)?`)
  t.deepEqual(await snapshot(s.modules), before, 'nothing installed')
})

test('a repository re-created on purpose (a new id) is refused (65) until fetch --accept-repository ID; then the old one is the stranger', async (t) => {
  const s = await replayScenario(t)
  const fetch = (...extra: string[]) => cli(['fetch', 'foo@^1.3', '--source', s.repo, '--trust', s.pub, '--module-dir', s.modules, '--json', ...extra])
  const first = await fetch()
  t.is(first.exitCode, 0, first.stderr)
  const old = JSON.parse(first.stdout).repository
  t.regex(old, /^[0-9a-f]{32}$/)
  t.is(old, JSON.parse(await readFile(join(s.repo, 'index.json'), 'utf8')).repository, 'every publish kept the first one\'s id')

  await rm(s.repo, {recursive: true})
  const made = await cli(['publish', join(s.dir, 'foo-1.3.0.tar.gz'), '--repo', s.repo, '--sign', s.key, '--json'])
  t.is(made.exitCode, 0, made.stderr)
  const fresh = JSON.parse(made.stdout).repository
  t.not(fresh, old)
  const refused = await fetch()
  t.is(refused.exitCode, 65, refused.stdout)
  t.is(
    JSON.parse(refused.stdout).error.message,
    `index of ${s.repo} is of repository ${fresh}, not ${old}, which this node accepted from it: another repository's index in its place (one signed with the same key)? ` +
      `If ${s.repo} was re-created on purpose, accept its new id once, as the publisher's side gives it: localpuppet fetch APP --source ${s.repo} --accept-repository ID (or set repository_id to it)`,
  )
  t.false(JSON.stringify(JSON.parse(refused.stdout).error.suggestions).includes(fresh), 'no hint names the id the refused index carries')

  t.is((await fetch('--accept-repository', 'not-an-id')).exitCode, 64)
  t.is((await fetch('--accept-repository', old)).exitCode, 65, 'the flag names what the index must be')
  const accepted = await fetch('--accept-repository', fresh)
  t.is(accepted.exitCode, 0, accepted.stderr)
  t.like(JSON.parse(accepted.stdout), {repository: fresh, indexVersion: 1})
  t.is((await fetch()).exitCode, 0, 'pinned from then on')

  // The old repository's index (a mirror not yet synced) is now refused.
  await restoreOld(s)
  const stale = await fetch()
  t.is(stale.exitCode, 65)
  t.regex(JSON.parse(stale.stdout).error.message, new RegExp(`is of repository ${old}, not ${fresh}`))
})
