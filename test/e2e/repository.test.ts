import {existsSync} from 'node:fs'
import {mkdir, readFile, readdir, rm, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import test from 'ava'

import {BIN, FIXTURES, cli, isolatePuppet, statusJson} from '../helpers/cli.js'
import {startNginx} from '../helpers/nginx.js'
import {DEMO_MODULES, demoRepository, keyPair} from '../helpers/repository.js'
import {smallFileSystem} from '../helpers/full-disk.js'
import {tempDir, writeTree} from '../helpers/temp.js'
import {testNeeding} from '../helpers/packages.js'

const nginxTest = await testNeeding(['nginx-light'])

const INPUT = join(FIXTURES, 'demo', 'input.yaml')

nginxTest('pack, publish (signed), fetch from nginx into an empty module dir, verify, apply with real puppet', async (t) => {
  const dir = await tempDir(t)
  const {key, pub} = await keyPair(dir, 'release')
  const {repo} = await demoRepository(join(dir, 'build'), key)
  t.deepEqual((await readdir(repo)).sort(), ['.localpuppet-publish.lock', 'archives', 'index.json', 'index.json.sig', 'objects'].filter((name) => existsSync(join(repo, name))))
  const nginx = await startNginx(repo, join(dir, 'nginx'))
  t.teardown(() => nginx.stop())

  const modules = join(dir, 'modules')
  await mkdir(modules)
  const fetched = await cli(['fetch', 'foo@^1.3', '--source', nginx.url, '--trust', pub, '--module-dir', modules, '--json'])
  t.is(fetched.exitCode, 0, fetched.stderr)
  t.deepEqual(JSON.parse(fetched.stdout), {
    source: `${nginx.url}/`,
    releases: [{release: 'foo/tags/1.4.0', ref: 'foo@^1.3', status: 'installed', bytes: JSON.parse(fetched.stdout).releases[0].bytes, modulepath: ['foo/tags/1.4.0', 'dist/tags/2.0.1'], delivery: 'archive', files: JSON.parse(fetched.stdout).releases[0].files}],
    signedBy: JSON.parse(fetched.stdout).signedBy,
    repository: JSON.parse(await readFile(join(repo, 'index.json'), 'utf8')).repository,
    indexVersion: 1,
    indexExpires: JSON.parse(await readFile(join(repo, 'index.json'), 'utf8')).expires,
    indexUnchanged: false,
    bytesRead: JSON.parse(fetched.stdout).bytesRead,
    untrusted: [],
    warnings: [],
  })
  t.true(JSON.parse(fetched.stdout).releases[0].bytes > 0)
  // The archive, the index and its signature, as they came over the wire.
  t.is(JSON.parse(fetched.stdout).bytesRead, JSON.parse(fetched.stdout).releases[0].bytes + (await readFile(join(repo, 'index.json'))).length + (await readFile(join(repo, 'index.json.sig'))).length)

  const verified = await cli(['verify', '--module-dir', modules])
  t.is(verified.exitCode, 0, verified.stdout)
  t.is(verified.stdout, 'ok        dist/tags/2.0.1\nok        foo/tags/1.4.0')

  // Again: nothing is downloaded.
  const again = await cli(['fetch', 'foo/tags/1.4.0', '--source', nginx.url, '--trust', pub, '--module-dir', modules])
  t.is(again.exitCode, 0, again.stderr)
  t.is(again.stdout, 'foo/tags/1.4.0: already present')

  const applied = await cli(['apply', INPUT, '--module-dir', modules, '--state-dir', join(dir, 'state'), '--', ...isolatePuppet(dir)])
  t.is(applied.exitCode, 0, applied.stderr)
  t.regex(applied.stdout, /Notice: I notify you!/)
  t.regex(applied.stdout, /Notice: platform class/)
})

nginxTest('apply --fetch: the newest matching tag in the repository is fetched and applied, and recorded', async (t) => {
  const dir = await tempDir(t)
  const {key, pub} = await keyPair(dir, 'release')
  const {repo} = await demoRepository(join(dir, 'build'), key)
  const nginx = await startNginx(repo, join(dir, 'nginx'))
  t.teardown(() => nginx.stop())
  // The node already has 1.3.0 only; the repository's newest ^1.3 is 1.4.0.
  const modules = join(dir, 'modules')
  await mkdir(modules)
  t.is((await cli(['fetch', 'foo/tags/1.3.0', '--source', nginx.url, '--trust', pub, '--module-dir', modules])).exitCode, 0)
  const input = join(dir, 'input.yaml')
  await writeFile(input, (await readFile(INPUT, 'utf8')).replace('foo@^1.4', 'foo@^1.3'))

  const config = join(dir, 'config.yaml')
  await writeFile(config, `source: ${nginx.url}\ntrust: ${pub}\nmodule_dir: ${modules}\nstate_dir: ${join(dir, 'state')}\n`)
  const env = {LOCALPUPPET_CONFIG: config}
  const plan = await cli(['plan', input, '--fetch', '--json', '--puppet', 'true'], {env})
  t.is(plan.exitCode, 0, plan.stderr)
  t.like(JSON.parse(plan.stdout), {release: 'foo/tags/1.4.0', ref: 'foo@^1.3', fetch: {source: `${nginx.url}/`, releases: [{release: 'foo/tags/1.4.0', status: 'installed'}]}})

  const applied = await cli(['apply', input, '--fetch', '--json', '--', ...isolatePuppet(dir)], {env})
  t.is(applied.exitCode, 0, applied.stderr)
  const record = JSON.parse(applied.stdout)
  t.like(record, {state: 'succeeded', release: 'foo/tags/1.4.0', ref: 'foo@^1.3', fetch: {source: `${nginx.url}/`, releases: [{release: 'foo/tags/1.4.0', status: 'already present', bytes: 0}]}})

  // --detach --fetch: the fetch happens in the caller, so an unreachable repository is reported at once.
  const port = nginx.port
  await nginx.stop()
  // (A release the node does not have: nothing to fall back on.)
  const detached = await cli(['apply', input, '--app', 'foo@^2', '--fetch', '--detach', '--source', `http://127.0.0.1:${port}`, '--', ...isolatePuppet(dir)], {env})
  t.is(detached.exitCode, 69, detached.stderr)
  t.regex(detached.stderr, /repository http:\/\/127\.0\.0\.1:\d+\/: connection refused \(4 attempts\); and nothing installed here to fall back on/)
  // No new run started: the refused attempt is recorded as such (issue 9), the last completed run is the one before.
  t.like((await statusJson(join(dir, 'state'))).record, {state: 'refused', exitCode: 69, lastCompleted: {id: record.id}})

  // The input's own release is installed and verifies: the background run applies it, the fallback recorded.
  const fellBack = await cli(['apply', input, '--fetch', '--detach', '--json', '--source', `http://127.0.0.1:${port}`, '--', ...isolatePuppet(dir)], {env})
  t.is(fellBack.exitCode, 0, fellBack.stderr)
  t.regex(fellBack.stderr, /warning: --fetch: .*connection refused.*applying foo\/tags\/1\.4\.0 as installed here/)
  const fallbackRun = await cli(['status', JSON.parse(fellBack.stdout).id, '--wait', '--timeout', '100', '--json'], {env})
  t.like(JSON.parse(fallbackRun.stdout), {state: 'succeeded', release: 'foo/tags/1.4.0', fetch: {source: `http://127.0.0.1:${port}`, releases: [], fallback: true}})

  // With the repository on disk (file://), --detach --fetch hands the pinned release to the background run.
  const started = await cli(['apply', input, '--fetch', '--detach', '--json', '--source', `file://${repo}`, '--', ...isolatePuppet(dir)], {env})
  t.is(started.exitCode, 0, started.stderr)
  const run = JSON.parse(started.stdout)
  const waited = await cli(['status', run.id, '--wait', '--timeout', '100', '--json'], {env})
  t.is(waited.exitCode, 0, waited.stdout)
  t.like(JSON.parse(waited.stdout), {state: 'succeeded', release: 'foo/tags/1.4.0', fetch: {source: repo, releases: [{release: 'foo/tags/1.4.0', status: 'already present'}]}})
})

test('publish: the same content again leaves the tags as they are (a new index version); other content for a published tag is refused (73) and nothing changes', async (t) => {
  const dir = await tempDir(t)
  const {key} = await keyPair(dir, 'release')
  const {repo, archives} = await demoRepository(join(dir, 'build'), key)
  const first = JSON.parse(await readFile(join(repo, 'index.json'), 'utf8'))
  t.is(first.version, 1)
  const again = await cli(['publish', ...archives, '--repo', repo, '--sign', key, '--json'])
  t.is(again.exitCode, 0, again.stderr)
  t.deepEqual(JSON.parse(again.stdout).releases.map((r: any) => [r.release, r.status]), [
    ['foo/tags/1.3.0', 'unchanged'],
    ['foo/tags/1.4.0', 'unchanged'],
  ])
  const second = JSON.parse(await readFile(join(repo, 'index.json'), 'utf8'))
  t.deepEqual(second.apps, first.apps)
  t.is(second.version, 2)
  t.like(JSON.parse(again.stdout), {version: 2, expires: second.expires})
  const before = await readFile(join(repo, 'index.json'))

  const other = join(dir, 'other')
  await writeTree(other, {'foo/tags/1.4.0/foo/manifests/init.pp': 'class foo { notify { "other": } }\n'})
  const archive = join(dir, 'other-foo-1.4.0.tar.gz')
  t.is((await cli(['pack', 'foo/tags/1.4.0', '--module-dir', other, '-o', archive])).exitCode, 0)
  const conflict = await cli(['publish', archive, '--repo', repo, '--sign', key])
  t.is(conflict.exitCode, 73, conflict.stderr)
  t.regex(conflict.stderr, /^localpuppet: foo\/tags\/1\.4\.0 is already published with other content \(sha256:\w+; this archive: sha256:\w+\)/)
  t.deepEqual(await readFile(join(repo, 'index.json')), before)

  // A signed repository is not re-published unsigned (its signature would go stale).
  const unsigned = await cli(['publish', archives[0], '--repo', repo])
  t.is(unsigned.exitCode, 64)
  t.regex(unsigned.stderr, /is a signed repository \(index\.json\.sig\); publish with --sign KEY\.pem/)
})

test('publish of the same archive repairs a stored archive that was changed or removed (the index entry kept), so nodes fetch it again; another copy of the same content cannot (73)', async (t) => {
  const dir = await tempDir(t)
  const {key, pub} = await keyPair(dir, 'release')
  const {repo, archives} = await demoRepository(join(dir, 'build'), key)
  const stored = join(repo, 'archives', 'foo', 'foo-1.3.0.tar.gz')
  const apps = JSON.parse(await readFile(join(repo, 'index.json'), 'utf8')).apps
  const modules = join(dir, 'modules')
  await mkdir(modules)
  const fetch = () => cli(['fetch', 'foo/tags/1.3.0', '--source', repo, '--trust', pub, '--module-dir', modules])

  // One byte changed on the server: nodes refuse it, and are told how it is repaired.
  const bytes = await readFile(stored)
  bytes[bytes.length - 100] ^= 0xff
  await writeFile(stored, bytes)
  const refused = await fetch()
  t.is(refused.exitCode, 65, refused.stderr)
  t.regex(refused.stderr, /foo-1\.3\.0\.tar\.gz: sha256 \w+ differs from the index's \w+; refused\n {2}hint: .*publishing the same archive again repairs it/)

  // Another copy of the same tree (unsigned: other bytes) cannot stand in for the listed one: nothing changes.
  const unsigned = join(dir, 'unsigned-foo-1.3.0.tar.gz')
  t.is((await cli(['pack', 'foo/tags/1.3.0', '--module-dir', DEMO_MODULES, '-o', unsigned])).exitCode, 0)
  const index = await readFile(join(repo, 'index.json'))
  const other = await cli(['publish', unsigned, '--repo', repo, '--sign', key])
  t.is(other.exitCode, 73, other.stderr)
  t.regex(other.stderr, /^localpuppet: foo\/tags\/1\.3\.0: the repository's archives\/foo\/foo-1\.3\.0\.tar\.gz is not what its index lists \(another size or sha256\), and this archive is another copy of the same content/)
  t.deepEqual(await readFile(join(repo, 'index.json')), index)
  t.deepEqual(await readFile(stored), bytes)

  const repaired = await cli(['publish', ...archives, '--repo', repo, '--sign', key])
  t.is(repaired.exitCode, 0, repaired.stderr)
  t.is(
    repaired.stdout.split('\n').slice(0, 2).join('\n'),
    "repaired foo/tags/1.3.0: the repository's archives/foo/foo-1.3.0.tar.gz was missing or not what the index lists; written again from this archive\n" +
      'unchanged foo/tags/1.4.0 (already published with the same content)',
  )
  t.deepEqual(await readFile(stored), await readFile(archives[0]))
  t.deepEqual(JSON.parse(await readFile(join(repo, 'index.json'), 'utf8')).apps, apps, 'the index entries are kept')
  const fetched = await fetch()
  t.is(fetched.exitCode, 0, fetched.stderr)

  // Removed: written again too.
  await rm(stored)
  const again = await cli(['publish', archives[0], '--repo', repo, '--sign', key, '--json'])
  t.is(again.exitCode, 0, again.stderr)
  t.deepEqual(JSON.parse(again.stdout).releases.map((r: any) => [r.release, r.status]), [['foo/tags/1.3.0', 'repaired']])
  t.deepEqual(await readFile(stored), await readFile(archives[0]))
  const unchanged = await cli(['publish', archives[0], '--repo', repo, '--sign', key, '--json'])
  t.deepEqual(JSON.parse(unchanged.stdout).releases.map((r: any) => r.status), ['unchanged'])
})

const asRoot = process.getuid?.() === 0 ? test : test.skip

asRoot('publish onto a full disk: 74 naming the repository or the archive being written, no temporary file left, the index as it was', async (t) => {
  const dir = await tempDir(t)
  const {key} = await keyPair(dir, 'release')
  const {archives} = await demoRepository(join(dir, 'build'), key)
  const {mount, fill} = await smallFileSystem(t, 256)
  const repo = join(mount, 'repo')
  t.is((await cli(['publish', archives[0], '--repo', repo, '--sign', key])).exitCode, 0)
  const index = await readFile(join(repo, 'index.json'))
  await rm(join(repo, 'archives', 'foo', 'foo-1.3.0.tar.gz'))
  await fill()
  const listing = async () => (await readdir(repo, {recursive: true})).sort()
  const before = await listing()
  for (const archive of archives) {
    const full = await cli(['publish', archive, '--repo', repo, '--sign', key])
    t.is(full.exitCode, 74, full.stderr)
    t.regex(full.stderr, new RegExp(`^localpuppet: (repository ${repo}|lock ${repo}/\\.localpuppet-publish\\.lock|archive ${repo}/archives/foo/foo-1\\.[34]\\.0\\.tar\\.gz): no space left on the device`, 'm'))
    t.deepEqual(await listing(), before, 'no temporary file left')
    t.deepEqual(await readFile(join(repo, 'index.json')), index)
  }
})

test('publish refuses a corrupt or mutable archive and leaves the repository as it was', async (t) => {
  const dir = await tempDir(t)
  const repo = join(dir, 'repo')
  const archive = join(dir, 'foo.tar.gz')
  t.is((await cli(['pack', 'foo/tags/1.4.0', '--module-dir', DEMO_MODULES, '-o', archive])).exitCode, 0)
  const bytes = await readFile(archive)
  const corrupt = join(dir, 'corrupt.tar.gz')
  await writeFile(corrupt, bytes.subarray(0, bytes.length - 40))
  const refused = await cli(['publish', corrupt, '--repo', repo])
  t.is(refused.exitCode, 65, refused.stderr)
  t.false(existsSync(join(repo, 'index.json')))
  const trunk = join(dir, 'trunk.tar.gz')
  t.is((await cli(['pack', 'foo/trunk', '--allow-mutable', '--module-dir', DEMO_MODULES, '-o', trunk])).exitCode, 0)
  const mutable = await cli(['publish', trunk, '--repo', repo])
  t.is(mutable.exitCode, 65)
  t.regex(mutable.stderr, /foo\/trunk is mutable; repositories hold tags only/)
})

test('publishers at the same time do not lose each other\'s tags', async (t) => {
  const dir = await tempDir(t)
  const modules = join(dir, 'modules')
  const tags = ['1.0.0', '1.1.0', '1.2.0', '1.3.0', '1.4.0', '1.5.0']
  await writeTree(modules, Object.fromEntries(tags.map((tag) => [`bar/tags/${tag}/bar/manifests/init.pp`, `class bar { notify { "${tag}": } }\n`])))
  const archives = await Promise.all(
    tags.map(async (tag) => {
      const archive = join(dir, `bar-${tag}.tar.gz`)
      const packed = await cli(['pack', `bar/tags/${tag}`, '--module-dir', modules, '-o', archive])
      t.is(packed.exitCode, 0, packed.stderr)
      return archive
    }),
  )
  const repo = join(dir, 'repo')
  const results = await Promise.all(archives.map((archive) => cli(['publish', archive, '--repo', repo])))
  for (const result of results) t.is(result.exitCode, 0, result.stderr)
  const index = JSON.parse(await readFile(join(repo, 'index.json'), 'utf8'))
  t.deepEqual(Object.keys(index.apps.bar.tags).sort(), tags)
  t.is(index.version, tags.length, 'each publisher wrote the next version: none wrote the same one twice')
  for (const tag of tags) t.true(existsSync(join(repo, index.apps.bar.tags[tag].archive)))
})

test('progress (bytes, rate) is shown on a terminal only, never when piped or with --json', async (t) => {
  const dir = await tempDir(t)
  const {key, pub} = await keyPair(dir, 'release')
  const {repo} = await demoRepository(join(dir, 'build'), key)
  const modules = join(dir, 'modules')
  await mkdir(modules)
  const piped = await cli(['fetch', 'foo/tags/1.3.0', '--source', repo, '--trust', pub, '--module-dir', modules])
  t.is(piped.exitCode, 0, piped.stderr)
  t.is(piped.stderr, '')
  const {execa} = await import('execa')
  const command = `node ${BIN} fetch foo/tags/1.4.0 --source ${repo} --trust ${pub} --module-dir ${modules}`
  const tty = await execa('script', ['-qec', command, '/dev/null'], {reject: false, env: {FORCE_COLOR: '0'}})
  t.is(tty.exitCode, 0, tty.stdout)
  t.regex(tty.stdout, /foo\/tags\/1\.4\.0 {2}[\d.]+ (?:B|KiB) \/ [\d.]+ (?:B|KiB) {2}[\d.]+ (?:B|KiB|MiB|GiB)\/s/)
  t.regex(tty.stdout, /fetched foo\/tags\/1\.4\.0 from /)
})
