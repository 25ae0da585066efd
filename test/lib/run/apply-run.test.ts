import {existsSync} from 'node:fs'
import {readFile, stat} from 'node:fs/promises'
import {join} from 'node:path'

import test from 'ava'

import {parseNodeInput} from '../../../src/lib/input/node-input.js'
import {applyPlan} from '../../../src/lib/run/apply-run.js'
import {buildRunPlan} from '../../../src/lib/run/run-plan.js'
import {newRunId} from '../../../src/lib/state/run-id.js'
import {readRunRecord} from '../../../src/lib/state/run-record.js'
import {tempDir, writeTree} from '../../helpers/temp.js'

async function planFor(t: Parameters<typeof tempDir>[0], puppetScript: string) {
  const dir = await tempDir(t)
  await writeTree(dir, {
    'modules/foo/trunk/foo/manifests/init.pp': 'class foo {}\n',
    // Answers `puppet config print` (where Puppet's lock files are) like the real one.
    'bin/puppet': {
      mode: 0o755,
      content: puppetScript.replace('\n', `\nif [ "$1" = config ]; then echo '{"agent_catalog_run_lockfile": "${dir}/catalog.lock", "agent_disabled_lockfile": "${dir}/disabled.lock"}'; exit 0; fi\n`),
    },
  })
  const input = parseNodeInput('app: foo/trunk\nclasses: [foo]\nparameters:\n  secret: hunter2\n', 'input.yaml')
  const plan = await buildRunPlan(input, {moduleDir: join(dir, 'modules'), stateDir: join(dir, 'state'), puppet: join(dir, 'bin/puppet')}, newRunId())
  return {dir, plan}
}

test('a puppet that cannot be started after the record exists is recorded as error, exit 69', async (t) => {
  const {dir, plan} = await planFor(t, '#!/bin/sh\nexit 0\n')
  // Puppet vanishes between planning and starting it.
  plan.command[0] = join(dir, 'bin/gone')
  const outcome = await applyPlan(plan)
  t.is(outcome.exitCode, 69)
  const record = await readRunRecord(plan.stateDir, plan.runId)
  t.is(record.state, 'error')
  t.regex(record.error!, /could not start .*gone/)
  t.false(existsSync(join(plan.stateDir, 'lock')))
})

test('the ENC script prints the document, and secrets stay in 0600 files in a 0700 directory', async (t) => {
  const {plan} = await planFor(t, '#!/bin/sh\necho "ran with $# args"\nexit 2\n')
  const outcome = await applyPlan(plan)
  t.is(outcome.exitCode, 0)
  t.is(outcome.record.state, 'succeeded')
  t.is(outcome.record.puppetExitCode, 2)
  t.is(outcome.record.resources, null, 'no summary was written, so none is reported')
  t.is(await readFile(plan.files.encYaml, 'utf8'), plan.encYaml)
  t.regex(plan.encYaml, /secret: hunter2/)
  t.is((await stat(plan.files.dir)).mode & 0o777, 0o700)
  for (const file of [plan.files.encYaml, plan.files.record, plan.files.log]) t.is((await stat(file)).mode & 0o777, 0o600, file)
  t.regex(await readFile(plan.files.log, 'utf8'), /ran with \d+ args\nlocalpuppet: puppet exited 2\n$/)
})

test('an abort before puppet starts records the run as interrupted', async (t) => {
  const {plan} = await planFor(t, '#!/bin/sh\nexit 0\n')
  const controller = new AbortController()
  const outcome = await applyPlan(plan, {signal: controller.signal, onStart: () => controller.abort('SIGTERM')})
  t.is(outcome.exitCode, 143)
  t.is(outcome.record.state, 'interrupted')
  t.is((await readRunRecord(plan.stateDir, plan.runId)).state, 'interrupted')
})
