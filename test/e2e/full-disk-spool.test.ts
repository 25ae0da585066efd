// A full disk where a node spools its PuppetDB commands: the run's result stands (its exit
// code, its record), and one warning says the report is lost; nothing half-written is left.
import {execFileSync} from 'node:child_process'
import {mkdir, readdir} from 'node:fs/promises'
import {join} from 'node:path'

import test from 'ava'

import {FAKE_PUPPET, FIXTURES, cli} from '../helpers/cli.js'
import {fillLeaving} from '../helpers/full-disk.js'
import {tempDir} from '../helpers/temp.js'

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
