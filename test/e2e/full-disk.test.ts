// A full disk on a node, where it spools its PuppetDB commands (the run's result stands, one
// warning says the report is lost) and where it keeps its input and layers (all of this
// fetch's or none): nothing half-written is left.
import {execFileSync} from 'node:child_process'
import {mkdir, readdir, readFile, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import test from 'ava'

import {FAKE_PUPPET, FIXTURES, cli} from '../helpers/cli.js'
import {fillLeaving} from '../helpers/full-disk.js'
import {demoRepository, keyPair} from '../helpers/repository.js'
import {tempDir, writeTree} from '../helpers/temp.js'

const asRoot = process.getuid?.() === 0 ? test : test.skip

asRoot("apply with PuppetDB configured and its spool on a full disk: the run succeeds (0, recorded succeeded), one warning says this run's report is lost; the spool holds nothing of it", async (t) => {
  const dir = await tempDir(t)
  const state = join(dir, 'state')
  const spool = join(state, 'puppetdb-spool')
  await mkdir(spool, {recursive: true, mode: 0o700})
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=64k,mode=0700', 'tmpfs', spool])
  t.teardown(() => execFileSync('umount', ['-l', spool]))
  await fillLeaving(spool, 0)
  const env = {FAKE_PUPPET_DIR: dir, FAKE_PUPPET_SLEEP: '0', LOCALPUPPET_CONFIG: '', LOCALPUPPET_PUPPETDB: 'http://127.0.0.1:1', LOCALPUPPET_NODE_NAME: 'web1'}
  const applied = await cli(['apply', join(FIXTURES, 'demo', 'input.yaml'), '--module-dir', join(FIXTURES, 'demo', 'modules'), '--state-dir', state, '--puppet', FAKE_PUPPET], {env})
  t.is(applied.exitCode, 0, applied.stderr)
  const warnings = applied.stderr.split('\n').filter((line) => line.includes('puppetdb'))
  t.deepEqual(warnings.length, 1, applied.stderr)
  t.regex(warnings[0], /puppetdb: this run's report was not spooled, it is lost \(PuppetDB will not have it\): PuppetDB spool: no space left on the device.*; what was spooled before is kept$/)
  const status = await cli(['status', '--state-dir', state, '--json'], {env})
  t.is(JSON.parse(status.stdout).state, 'succeeded', status.stdout)
  t.deepEqual(await readdir(spool), ['filler2'], 'no command, no temporary file')
})

asRoot('apply --fetch with its input directory too full for this fetch\'s input and layer: 74 naming the input file; the input and the layer kept before both as they were (an offline run never merges the new layer into the old input), no temporary file', async (t) => {
  const dir = await tempDir(t)
  const {key, pub} = await keyPair(dir, 'release')
  const {repo} = await demoRepository(join(dir, 'build'), key)
  const input = (port: number) => `app: foo/tags/1.4.0\nlayers: [site/dc1]\nclasses:\n  foo:\n    port: ${port}\n`
  const layer = (datacenter: string) => `parameters:\n  datacenter: ${datacenter}\n`
  const publish = async (port: number, datacenter: string) => {
    await writeTree(join(dir, 'git'), {'web1.yaml': input(port), 'layers/site/dc1.yaml': layer(datacenter)})
    const published = await cli(['publish', '--node', 'web1', '--input', join(dir, 'git/web1.yaml'), '--layers', join(dir, 'git/layers'), '--repo', repo, '--sign', key])
    t.is(published.exitCode, 0, published.stderr)
  }

  const etc = join(dir, 'etc')
  await mkdir(etc)
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=64k,mode=0755', 'tmpfs', etc])
  t.teardown(() => execFileSync('umount', ['-l', etc]))
  const settings = {module_dir: join(dir, 'modules'), state_dir: join(dir, 'state'), source: repo, trust: pub, input: join(etc, 'input.yaml'), input_from: 'repository', node_name: 'web1'}
  await mkdir(settings.module_dir)
  await writeFile(join(dir, 'config.yaml'), Object.entries(settings).map(([k, v]) => `${k}: ${JSON.stringify(v)}\n`).join(''))
  const env = {FAKE_PUPPET_DIR: dir, FAKE_PUPPET_SLEEP: '0', LOCALPUPPET_CONFIG: join(dir, 'config.yaml')}
  const apply = () => cli(['apply', '--fetch', '--puppet', FAKE_PUPPET], {env})

  await publish(8080, 'dc1')
  const first = await apply()
  t.is(first.exitCode, 0, first.stderr)
  const kept = {input: await readFile(join(etc, 'input.yaml'), 'utf8'), layer: await readFile(join(etc, 'layers/site/dc1.yaml'), 'utf8')}
  t.is(kept.layer, layer('dc1'))

  // Both change; the disk has room for one of them (a page), not both.
  await publish(9090, 'dc2')
  await fillLeaving(etc, 4)
  const full = await apply()
  t.is(full.exitCode, 74, full.stderr)
  t.regex(full.stderr, new RegExp(`^localpuppet: input file ${etc}/input\\.yaml: no space left on the device$`, 'm'))
  t.is(await readFile(join(etc, 'input.yaml'), 'utf8'), kept.input)
  t.is(await readFile(join(etc, 'layers/site/dc1.yaml'), 'utf8'), kept.layer, 'not the new layer beside the old input')
  t.deepEqual((await readdir(etc, {recursive: true})).filter((name) => name.endsWith('.tmp')), [], 'no temporary file')
})
