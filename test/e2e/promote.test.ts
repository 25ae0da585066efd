import {chmod, readFile, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import test from 'ava'

import {cli} from '../helpers/cli.js'
import {demoRepository, keyPair} from '../helpers/repository.js'
import {tempDir} from '../helpers/temp.js'

test('promote: --for and --min-nodes need --require-healthy, --prometheus, --stale-after and --prometheus-timeout it or a policy (64, nothing moved); --json says promoted: true', async (t) => {
  const dir = await tempDir(t)
  const {key} = await keyPair(dir, 'release')
  const {repo} = await demoRepository(join(dir, 'build'), key)
  const index = async () => JSON.parse(await readFile(join(repo, 'index.json'), 'utf8'))
  const before = await index()
  const promote = (...extra: string[]) => cli(['promote', 'foo/tags/1.4.0', '--channel', 'stable', '--repo', repo, '--sign', key, ...extra])

  for (const flags of [['--for', '10m'], ['--min-nodes', '2']]) {
    const ungated = await promote(...flags)
    t.is(ungated.exitCode, 64, `${flags[0]}: ${ungated.stderr}`)
    t.is(ungated.stderr, `localpuppet: ${flags[0]} needs --require-healthy`, flags[0])
  }

  // Prometheus' flags serve a channel's policy too: without either, they check nothing (64).
  for (const flags of [['--prometheus', 'http://127.0.0.1:9'], ['--puppetdb', 'https://127.0.0.1:9'], ['--stale-after', '1h'], ['--prometheus-timeout', '10s']]) {
    const ungated = await promote(...flags)
    t.is(ungated.exitCode, 64, `${flags[0]}: ${ungated.stderr}`)
    t.is(ungated.stderr, `localpuppet: ${flags[0]} needs --require-healthy (or a policy on foo/channels/stable, which has none)`, flags[0])
  }

  const two = await promote('--for', '10m', '--min-nodes', '2', '--json')
  t.is(two.exitCode, 64)
  t.deepEqual(JSON.parse(two.stdout).error, {code: 'usage', exitCode: 64, message: '--for and --min-nodes need --require-healthy'})
  t.is((await promote('--require-healthy', 'canary')).stderr, 'localpuppet: --require-healthy needs --prometheus or --puppetdb (or the prometheus or puppetdb setting: /etc/localpuppet/config.yaml, env LOCALPUPPET_PROMETHEUS, LOCALPUPPET_PUPPETDB)')
  t.is((await promote('--require-healthy', 'canary', '--prometheus', 'http://127.0.0.1:9', '--puppetdb', 'https://127.0.0.1:9')).stderr, 'localpuppet: --prometheus and --puppetdb: give one source of the fleet')

  t.deepEqual(await index(), before, 'nothing moved, not even re-signed')
  // A plain promote reads no setting: a configuration file it could not trust (0666) does not stop it; a gate that reads it is 77.
  const config = join(dir, 'config.yaml')
  await writeFile(config, 'prometheus: http://127.0.0.1:9\n')
  await chmod(config, 0o666)
  t.is((await cli(['promote', 'foo/tags/1.4.0', '--channel', 'canary', '--repo', repo, '--sign', key], {env: {LOCALPUPPET_CONFIG: config}})).exitCode, 0)
  t.is((await cli(['promote', 'foo/tags/1.4.0', '--channel', 'stable', '--require-healthy', 'canary', '--repo', repo, '--sign', key], {env: {LOCALPUPPET_CONFIG: config}})).exitCode, 77)
  const moved = await promote('--json')
  t.is(moved.exitCode, 0, moved.stderr)
  t.like(JSON.parse(moved.stdout), {promoted: true, app: 'foo', channel: 'stable', tag: '1.4.0', moved: true, version: before.version + 2})
  t.is((await index()).apps.foo.channels.stable, '1.4.0')
})
