import {readFile, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import test from 'ava'
import {execa} from 'execa'

import {BIN, REPO} from '../helpers/cli.js'
import {tempDir} from '../helpers/temp.js'
import {testNeeding} from '../helpers/packages.js'
import {readManual} from '../helpers/manual.js'

const analyzeTest = await testNeeding(['systemd'])

const COMMAND = '/usr/local/bin/localpuppet'
const UNITS = ['localpuppet.service', 'localpuppet.timer', 'localpuppet-bootstrap.service']
const unit = async (name: string) => readFile(join(REPO, 'integrations/systemd', name), 'utf8')
/** `Key=value` lines of a unit, in order. */
const settings = (text: string, key: string) => [...text.matchAll(new RegExp(`^${key}=(.*)$`, 'gm'))].map((match) => match[1])

analyzeTest('the systemd service, timer and bootstrap unit pass systemd-analyze verify', async (t) => {
  const dir = await tempDir(t)
  for (const name of UNITS) {
    // verify checks that ExecStart's command is executable: point it at this checkout's.
    await writeFile(join(dir, name), (await unit(name)).replaceAll(COMMAND, BIN))
  }

  const verify = await execa('systemd-analyze', ['verify', '--man=no', ...UNITS], {cwd: dir, reject: false})
  t.is(verify.exitCode, 0, verify.stderr)
  // Other units installed on the machine may warn too; only ours must be clean.
  t.deepEqual(
    verify.stderr.split('\n').filter((line) => /localpuppet/.test(line)),
    [],
    'no warnings about our units',
  )
})

test('the units find Puppet in /opt/puppetlabs/bin, randomise in one place, stop a hung run, and wait for a good bootstrap', async (t) => {
  const service = await unit('localpuppet.service')
  const bootstrap = await unit('localpuppet-bootstrap.service')
  const timer = await unit('localpuppet.timer')
  for (const text of [service, bootstrap]) {
    const [path] = settings(text, 'Environment')
    t.regex(path, /^PATH=(.*:)?\/opt\/puppetlabs\/bin(:|$)/)
    t.regex(path, /(^PATH=|:)\/usr\/bin(:|$)/)
    const [execStart] = settings(text, 'ExecStart')
    t.true(execStart.startsWith(`${COMMAND} apply `), execStart)
    // The run's own limit comes before systemd's, so Puppet is stopped by localpuppet (75, recorded).
    const timeout = Number(/--timeout (\d+)/.exec(execStart)?.[1])
    t.true(timeout > 0 && timeout < 2 * 3600, execStart)
    t.deepEqual(settings(text, 'TimeoutStartSec'), ['2h'])
    t.notRegex(execStart, /--splay/, 'the timer randomises; a start by hand runs at once')
  }

  t.deepEqual(settings(timer, 'RandomizedDelaySec'), ['5min'])
  t.deepEqual(settings(service, 'Requires'), ['localpuppet-bootstrap.service'])
  t.regex(settings(service, 'After')[0], /\blocalpuppet-bootstrap\.service\b/)
  t.deepEqual(settings(bootstrap, 'ConditionPathExists'), ['!/var/lib/localpuppet/bootstrapped'])
  t.deepEqual(settings(bootstrap, 'ExecStartPost'), ['/usr/bin/touch /var/lib/localpuppet/bootstrapped'])
  t.deepEqual(settings(service, 'SuccessExitStatus'), ['73'])
})

test('the units, the MCollective agent, the git hook and the README agree on where the command is', async (t) => {
  const readme = await readFile(join(REPO, 'README.md'), 'utf8')
  t.true(readme.includes(`ln -sf "$PWD/bin/run.js" ${COMMAND}`), 'the README says how to install it there')
  t.regex(await readFile(join(REPO, 'integrations/mcollective/agent/localpuppet.rb'), 'utf8'), new RegExp(`DEFAULT_EXECUTABLE = '${COMMAND}'`))
  t.regex(await readFile(join(REPO, 'integrations/mcollective/plugin.d/localpuppet.cfg'), 'utf8'), new RegExp(`^#?executable = ${COMMAND}$`, 'm'))
  t.true((await readFile(join(REPO, 'integrations/git/post-receive'), 'utf8')).includes(`[ -x ${COMMAND} ]`))
  for (const name of UNITS.filter((name) => name.endsWith('.service'))) {
    t.true(settings(await unit(name), 'ExecStart')[0].startsWith(COMMAND), name)
  }
})

test("issue 35: the manual's --fetch drop-in is the shipped service's command line with --fetch added, nothing dropped (its lifecycle_stage fact)", async (t) => {
  const [shipped] = settings(await unit('localpuppet.service'), 'ExecStart')
  const readme = await readManual()
  const dropIn = /printf '\[Service\]\\nExecStart=\\nExecStart=([^\\]*)\\n'/.exec(readme)?.[1]
  t.is(dropIn, shipped.replace(`${COMMAND} apply `, `${COMMAND} apply --fetch `))
})
