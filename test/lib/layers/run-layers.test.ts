import {chmod, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import test, {type ExecutionContext} from 'ava'

import {LocalpuppetError} from '../../../src/lib/errors.js'
import {parseNodeInput} from '../../../src/lib/input/node-input.js'
import {applyPlan} from '../../../src/lib/run/apply-run.js'
import {runFingerprint} from '../../../src/lib/run/fingerprint.js'
import {buildReplayPlan} from '../../../src/lib/run/replay.js'
import {buildRunPlan} from '../../../src/lib/run/run-plan.js'
import {newRunId} from '../../../src/lib/state/run-id.js'
import {readRunRecord} from '../../../src/lib/state/run-record.js'
import {tempDir, writeTree} from '../../helpers/temp.js'

const NODE = 'app: web/tags/1.0.0\nlayers: [site/dc1]\nremove: [classes.motd]\nclasses:\n  web:\n    port: 8080\nparameters:\n  tier: gold\n'

/** A module directory whose release ships a layer, a layers directory with site/dc1, and a puppet that exits 0. */
async function layered(t: ExecutionContext) {
  const dir = await tempDir(t)
  await chmod(dir, 0o755)
  await writeTree(dir, {
    'modules/web/tags/1.0.0/web/manifests/init.pp': 'class web($port = 80, $docroot = "/srv") {}\n',
    'modules/web/tags/1.0.0/ntp/manifests/init.pp': 'class ntp($servers = [], $iburst = false) {}\n',
    'modules/web/tags/1.0.0/motd/manifests/init.pp': 'class motd($text = "") {}\n',
    'modules/web/tags/1.0.0/layer.yaml': 'classes:\n  web:\n    docroot: /srv/www\n  ntp:\n    servers: [pool.ntp.org]\n    iburst: true\n  motd: ~\nparameters:\n  tier: standard\n',
    'layers/site/dc1.yaml': 'classes:\n  ntp:\n    servers: [ntp1.dc1]\nparameters:\n  datacenter: dc1\n',
    'bin/puppet': {mode: 0o755, content: `#!/bin/sh\nif [ "$1" = config ]; then echo '{"agent_catalog_run_lockfile": "${dir}/catalog.lock", "agent_disabled_lockfile": "${dir}/disabled.lock"}'; exit 0; fi\nexit 0\n`},
  })
  const options = {moduleDir: join(dir, 'modules'), stateDir: join(dir, 'state'), puppet: join(dir, 'bin/puppet'), layersDir: join(dir, 'layers')}
  return {dir, options, input: () => parseNodeInput(NODE, join(dir, 'web1.yaml'))}
}

test('a run applies the release layer, the site layer and the node merged; the plan names every origin, the run record every layer digest', async (t) => {
  const {dir, options, input} = await layered(t)
  const plan = await buildRunPlan(input(), options, newRunId())
  t.deepEqual(plan.enc.classes, {web: {docroot: '/srv/www', port: 8080}, ntp: {servers: ['ntp1.dc1'], iburst: true}})
  t.like(plan.enc.parameters, {tier: 'gold', datacenter: 'dc1'})
  t.deepEqual(plan.layers!.origins.classes.ntp.parameters.servers, {layer: 'site/dc1', file: join(dir, 'layers/site/dc1.yaml'), line: 3})
  t.deepEqual(plan.layers!.origins.parameters.tier, {layer: 'node', file: join(dir, 'web1.yaml'), line: 8})
  t.deepEqual(plan.layers!.layers.map((layer) => layer.name), ['release web/tags/1.0.0', 'site/dc1', 'node'])
  // What the input said stays in the plan as it was written.
  t.deepEqual(plan.input.document.layers, ['site/dc1'])
  const outcome = await applyPlan(plan)
  t.is(outcome.exitCode, 0)
  const record = await readRunRecord(plan.stateDir, plan.runId)
  t.deepEqual(record.layers!.layers, plan.layers!.layers)
  t.deepEqual(record.layers!.document.classes, plan.enc.classes)
})

test('a change in any layer, even one that changes no value, changes the fingerprint --if-changed compares', async (t) => {
  const {dir, options, input} = await layered(t)
  const before = await runFingerprint(await buildRunPlan(input(), options))
  t.is(await runFingerprint(await buildRunPlan(input(), options)), before)
  await writeFile(join(dir, 'layers/site/dc1.yaml'), '# reviewed\nclasses:\n  ntp:\n    servers: [ntp1.dc1]\nparameters:\n  datacenter: dc1\n')
  const after = await buildRunPlan(input(), options)
  t.not(await runFingerprint(after), before)
})

test('a replay applies the document that run computed, whatever the layers say today', async (t) => {
  const {dir, options, input} = await layered(t)
  const plan = await buildRunPlan(input(), options, newRunId())
  await applyPlan(plan)
  await writeFile(join(dir, 'layers/site/dc1.yaml'), 'parameters:\n  datacenter: dc2\n')
  const replay = await buildReplayPlan(plan.runId, options, newRunId())
  t.is(replay.encYaml.replace(/localpuppet_run_id: .*/, ''), plan.encYaml.replace(/localpuppet_run_id: .*/, ''))
})

test('a layer others can write is refused (77) naming it, before a byte is read; --allow-untrusted takes it with a warning', async (t) => {
  const {dir, options, input} = await layered(t)
  await chmod(join(dir, 'layers/site/dc1.yaml'), 0o666)
  const error = await t.throwsAsync(buildRunPlan(input(), options), {instanceOf: LocalpuppetError})
  t.is(error.exitCode, 77)
  t.regex(error.message, /^layer site\/dc1 .*dc1\.yaml is not trusted: writable by group and others/)
  const plan = await buildRunPlan(input(), {...options, allowUntrusted: true})
  t.true(plan.warnings.some((line) => line.startsWith('--allow-untrusted: ') && line.includes('dc1.yaml')))
})

test('a class from any layer that the release lacks is refused before the run, and a flat input of a release without a layer is planned as before', async (t) => {
  const {dir, options} = await layered(t)
  await writeFile(join(dir, 'layers/site/dc1.yaml'), 'classes:\n  nosuch: ~\n')
  const error = await t.throwsAsync(buildRunPlan(parseNodeInput('app: web/tags/1.0.0\nlayers: [site/dc1]\n', 'web1.yaml'), options), {instanceOf: LocalpuppetError})
  t.is(error.exitCode, 65)
  t.regex(error.message, /nosuch/)

  await writeTree(dir, {'modules/flat/trunk/flat/manifests/init.pp': 'class flat {}\n'})
  const flat = await buildRunPlan(parseNodeInput('app: flat/trunk\nclasses: [flat]\n', 'flat.yaml'), options)
  t.is(flat.layers, undefined)
  t.deepEqual(flat.enc.classes, ['flat'])
})
