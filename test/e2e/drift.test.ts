import {readFile, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import test from 'ava'

import {cli, isolatePuppet, statusJson} from '../helpers/cli.js'
import {tempDir, writeTree} from '../helpers/temp.js'

/*
 * Issue 35: drift under the real `puppet apply`, which never computes Puppet's own
 * corrective_change (agent run mode only). localpuppet's: what a run changed although its
 * fingerprint equals the previous run's, which succeeded.
 */

const manifest = (target: string, content: string) =>
  `class web {\n  file { '${target}': content => "${content}\\n" }\n  notify { 'a notify changes on every run: never drift': }\n}\n`

test('a file changed by hand between two runs of the same release and input is drift on the second run; a run whose release changed is not', async (t) => {
  const dir = await tempDir(t)
  const target = join(dir, 'managed.txt')
  const metrics = join(dir, 'localpuppet.prom')
  await writeTree(dir, {'modules/web/trunk/web/manifests/init.pp': manifest(target, 'managed'), 'input.yaml': 'app: web/trunk\nclasses: [web]\n'})
  const state = join(dir, 'state')
  const run = async () => {
    const result = await cli(['apply', join(dir, 'input.yaml'), '--module-dir', join(dir, 'modules'), '--state-dir', state, '--metrics-file', metrics, '--json', '--', ...isolatePuppet(dir)])
    t.is(result.exitCode, 0, result.stderr)
    return JSON.parse(result.stdout)
  }

  const corrective = async () => /^localpuppet_last_run_resources\{kind="corrective_change"\} (\d+)$/m.exec(await readFile(metrics, 'utf8'))?.[1]

  // The first run brings the system to the catalog: its changes are not drift.
  const first = await run()
  t.like(first, {state: 'succeeded', resources: {correctiveChange: 0}})
  t.true(first.resources.changed >= 2, JSON.stringify(first.resources))
  t.is(await corrective(), '0')

  // Changed by hand; the same release and input run again: the file put back is drift (the notify is not).
  await writeFile(target, 'changed by hand\n')
  const second = await run()
  t.is(await readFile(target, 'utf8'), 'managed\n')
  t.like(second, {state: 'succeeded', resources: {correctiveChange: 1}, corrected: {since: first.id, resources: [`File[${target}]`]}})
  t.is(await corrective(), '1', 'the metric the LocalpuppetDrift alert reads')
  const status = await statusJson(state)
  t.like(status.record, {id: second.id, drift: {count: 1, runId: second.id, noop: false}})
  t.regex(await readFile(second.log, 'utf8'), new RegExp(`drift: corrected 1 resource\\(s\\) changed since run ${first.id} \\(same fingerprint\\): File\\[`))
  const shown = await cli(['status', second.id, '--state-dir', state])
  t.true(shown.stdout.includes(`drift      1 resource(s) put back, changed outside Puppet since run ${first.id}: File[${target}]`), shown.stdout)

  // Nothing touched: the next run corrects nothing (its notify still "changes").
  const third = await run()
  t.like(third, {state: 'succeeded', resources: {correctiveChange: 0}, corrected: null})
  t.true(third.resources.changed >= 1)

  // The release changes what the file holds: that change is the release's, not drift.
  await writeFile(join(dir, 'modules/web/trunk/web/manifests/init.pp'), manifest(target, 'managed by 2'))
  const fourth = await run()
  t.is(await readFile(target, 'utf8'), 'managed by 2\n')
  t.like(fourth, {state: 'succeeded', resources: {correctiveChange: 0}, corrected: null})
  t.not(fourth.fingerprint, third.fingerprint)
  t.is(await corrective(), '0')
})
