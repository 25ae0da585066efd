import {readFile} from 'node:fs/promises'
import {join} from 'node:path'

import test from 'ava'

import {cli} from '../helpers/cli.js'
import {demoRepository, keyPair} from '../helpers/repository.js'
import {tempDir} from '../helpers/temp.js'

test('promote: --prometheus, --for, --min-nodes and --stale-after need --require-healthy (64, nothing moved); --json says promoted: true', async (t) => {
  const dir = await tempDir(t)
  const {key} = await keyPair(dir, 'release')
  const {repo} = await demoRepository(join(dir, 'build'), key)
  const index = async () => JSON.parse(await readFile(join(repo, 'index.json'), 'utf8'))
  const before = await index()
  const promote = (...extra: string[]) => cli(['promote', 'foo/tags/1.4.0', '--channel', 'stable', '--repo', repo, '--sign', key, ...extra])

  for (const flags of [['--prometheus', 'http://127.0.0.1:9'], ['--puppetdb', 'https://127.0.0.1:9'], ['--for', '10m'], ['--min-nodes', '2'], ['--stale-after', '1h']]) {
    const ungated = await promote(...flags)
    t.is(ungated.exitCode, 64, `${flags[0]}: ${ungated.stderr}`)
    t.is(ungated.stderr, `localpuppet: ${flags[0]} needs --require-healthy`, flags[0])
  }

  const two = await promote('--for', '10m', '--min-nodes', '2', '--json')
  t.is(two.exitCode, 64)
  t.deepEqual(JSON.parse(two.stdout).error, {code: 'usage', exitCode: 64, message: '--for and --min-nodes need --require-healthy'})
  t.is((await promote('--require-healthy', 'canary')).stderr, 'localpuppet: --require-healthy needs --prometheus or --puppetdb (or the prometheus or puppetdb setting: /etc/localpuppet/config.yaml, env LOCALPUPPET_PROMETHEUS, LOCALPUPPET_PUPPETDB)')
  t.is((await promote('--require-healthy', 'canary', '--prometheus', 'http://127.0.0.1:9', '--puppetdb', 'https://127.0.0.1:9')).stderr, 'localpuppet: --prometheus and --puppetdb: give one source of the fleet')

  t.deepEqual(await index(), before, 'nothing moved, not even re-signed')
  const moved = await promote('--json')
  t.is(moved.exitCode, 0, moved.stderr)
  t.like(JSON.parse(moved.stdout), {promoted: true, app: 'foo', channel: 'stable', tag: '1.4.0', moved: true, version: before.version + 1})
  t.is((await index()).apps.foo.channels.stable, '1.4.0')
})
