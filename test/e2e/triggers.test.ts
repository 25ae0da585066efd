import {existsSync} from 'node:fs'
import {mkdir, readFile, readdir, writeFile} from 'node:fs/promises'
import {join} from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'

import test from 'ava'
import {execa} from 'execa'

import {BIN, FAKE_PUPPET, FIXTURES, cli, isolatePuppet, statusJson} from '../helpers/cli.js'
import {tempDir, writeTree} from '../helpers/temp.js'

const DEMO = join(FIXTURES, 'demo')

/** A module dir of its own (so a test can change the code) and a fake puppet's scratch dir. */
async function setup(t: Parameters<typeof tempDir>[0]) {
  const dir = await tempDir(t)
  await writeTree(dir, {
    'modules/web/trunk/web/manifests/init.pp': "class web { notify { 'web v1': } }\n",
    'input.yaml': 'app: web/trunk\nclasses: [web]\n',
  })
  const fake = join(dir, 'fake')
  await mkdir(fake)
  const state = join(dir, 'state')
  const args = ['apply', join(dir, 'input.yaml'), '--module-dir', join(dir, 'modules'), '--state-dir', state, '--puppet', FAKE_PUPPET]
  return {dir, fake, state, args, env: {FAKE_PUPPET_DIR: fake, FAKE_PUPPET_SLEEP: '0'}}
}

test('apply --detach returns the run id at once; status --wait waits for real puppet to finish', async (t) => {
  const dir = await tempDir(t)
  const state = join(dir, 'state')
  const detached = await cli(['apply', join(DEMO, 'input.yaml'), '--module-dir', join(DEMO, 'modules'), '--state-dir', state, '--detach', '--json', '--', ...isolatePuppet(dir)])
  t.is(detached.exitCode, 0, detached.stderr)
  const started = JSON.parse(detached.stdout)
  t.is(started.state, 'running')
  t.regex(started.id, /^\d{8}T/)

  const waited = await cli(['status', started.id, '--state-dir', state, '--wait', '--timeout', '120', '--json'])
  t.is(waited.exitCode, 0, waited.stderr)
  const record = JSON.parse(waited.stdout)
  t.is(record.state, 'succeeded')
  t.is(record.resources.changed, 3)
  t.regex(await readFile(record.log, 'utf8'), /I notify you!/)
})

test('fast failures of apply --detach keep their exit codes, start nothing, and are recorded as refused', async (t) => {
  const {dir, state, args, env} = await setup(t)
  await writeFile(join(dir, 'bad.yaml'), 'app: web/trunk\nclases: [web]\n')
  const bad = await cli(['apply', join(dir, 'bad.yaml'), ...args.slice(2), '--detach'], {env})
  t.is(bad.exitCode, 65)
  const missing = await cli([...args.slice(0, -2), '--detach', '--puppet', join(dir, 'nope')], {env})
  t.is(missing.exitCode, 69)
  const twice = await cli([...args, '--detach', '--puppet', join(dir, 'nope')], {env})
  t.is(twice.exitCode, 64, 'a flag given twice is a usage error')
  const refused = JSON.parse((await cli(['history', '--state-dir', state, '--json'])).stdout)
  t.deepEqual(refused.map((r: {state: string; exitCode: number}) => [r.state, r.exitCode]), [['refused', 69], ['refused', 65]], 'the usage error is not an attempt')
  t.is((await statusJson(state)).exitCode, 1)

  // A run in progress holds the lock: --detach says so with 73 instead of starting.
  const first = await cli([...args, '--detach'], {env: {...env, FAKE_PUPPET_SLEEP: '300'}})
  t.is(first.exitCode, 0, first.stderr)
  const held = await cli([...args, '--detach'], {env})
  t.is(held.exitCode, 73)
  t.regex(held.stderr, new RegExp(`run ${first.stdout.trim().replaceAll('.', '\\.')} \\(pid \\d+\\) holds the lock`))
  // Busy is not failed, with --detach too: status still shows the run in progress.
  const {record, exitCode} = await statusJson(state)
  t.is(record.id, first.stdout.trim())
  t.is(exitCode, 75)
  process.kill(record.pid, 'SIGTERM')
  const stopped = await cli(['status', '--state-dir', state, '--wait', '--timeout', '30'])
  t.is(stopped.exitCode, 1)
})

test('a caller killed right after --detach returns does not kill the run', async (t) => {
  const {fake, state, args, env} = await setup(t)
  // The caller in a process group and session of its own, as a trigger's shell would be; then the whole group is killed.
  const caller = execa('node', [BIN, ...args, '--detach'], {env: {...env, FAKE_PUPPET_SLEEP: '3'}, detached: true, reject: false})
  const result = await caller
  t.is(result.exitCode, 0, String(result.stderr))
  for (const signal of ['SIGHUP', 'SIGKILL'] as const) {
    try {
      process.kill(-caller.pid!, signal)
    } catch {}
  }

  const waited = await cli(['status', String(result.stdout).trim(), '--state-dir', state, '--wait', '--timeout', '60'])
  t.is(waited.exitCode, 0, waited.stdout)
  t.regex(waited.stdout, /state\s+succeeded/)
  t.true(existsSync(join(fake, 'args')), 'puppet ran')
})

test('--if-changed skips an unchanged run, and runs after a code change or after a failed run', async (t) => {
  const {dir, fake, state, args, env} = await setup(t)
  const apply = async (extra: Record<string, string> = {}) => {
    const result = await cli([...args, '--if-changed', '--json'], {env: {...env, ...extra}})
    return {exitCode: result.exitCode, record: JSON.parse(result.stdout)}
  }

  t.is((await apply()).record.state, 'succeeded')
  const skipped = await apply()
  t.is(skipped.exitCode, 0)
  t.is(skipped.record.state, 'skipped')
  t.regex(skipped.record.reason, /nothing changed since run/)
  t.is((await cli(['status', '--state-dir', state])).exitCode, 0, 'a skipped run is a good run to status')

  await writeFile(join(dir, 'modules/web/trunk/web/manifests/init.pp'), "class web { notify { 'web v2': } }\n")
  t.is((await apply()).record.state, 'succeeded', 'the code changed')
  t.is((await apply()).record.state, 'skipped')

  await writeFile(join(dir, 'input.yaml'), 'app: web/trunk\nclasses: [web]\nparameters:\n  tier: gold\n')
  t.is((await apply()).record.state, 'succeeded', 'the input changed')

  // A failed newest run never causes a skip, though nothing changed.
  const failed = await cli([...args, '--json'], {env: {...env, FAKE_PUPPET_EXIT: '4'}})
  t.is(JSON.parse(failed.stdout).state, 'failed')
  t.is((await apply()).record.state, 'succeeded')
  t.is((await apply()).record.state, 'skipped')
  const puppetRuns = (await readFile(join(fake, 'args'), 'utf8')).length > 0
  t.true(puppetRuns)
})

test('--keep prunes the oldest run directories but never a running one', async (t) => {
  const {state, args, env} = await setup(t)
  // The oldest run claims to be running, by a live process (this test's).
  const runningId = '20200101T000000.000Z-0000'
  await mkdir(join(state, 'runs', runningId), {recursive: true})
  await writeFile(join(state, 'runs', runningId, 'run.json'), JSON.stringify({id: runningId, state: 'running', release: 'web/trunk', pid: process.pid, startedAt: '2020-01-01T00:00:00.000Z', durationMs: null, resources: null}))
  for (let i = 0; i < 4; i++) t.is((await cli([...args, '--keep', '2'], {env})).exitCode, 0)
  const runs = (await readdir(join(state, 'runs'))).sort()
  t.is(runs.length, 3)
  t.is(runs[0], runningId)
  const history = JSON.parse((await cli(['history', '--state-dir', state, '--json'])).stdout)
  t.deepEqual(history.map((r: {id: string}) => r.id), [...runs].reverse())
})

test('--on-finish gets the final record on stdin and its failure changes nothing', async (t) => {
  const {dir, state, args, env} = await setup(t)
  const out = join(dir, 'hook')
  const hook = `cat > ${out}.json; echo "$LOCALPUPPET_RUN_ID $LOCALPUPPET_RUN_STATE" > ${out}.env; echo hook says hi; exit 3`
  const result = await cli([...args, '--on-finish', hook], {env})
  t.is(result.exitCode, 0, 'the hook failed, the run did not')
  const {record: status} = await statusJson(state)
  const {lastCompleted: _l, puppetDisabled: _p, pointer: _i, applied: _a, drift: _d, ...record} = status
  const fromHook = JSON.parse(await readFile(`${out}.json`, 'utf8'))
  t.deepEqual(fromHook, record)
  t.is(fromHook.state, 'succeeded')
  t.is((await readFile(`${out}.env`, 'utf8')).trim(), `${record.id} succeeded`)
  const log = await readFile(record.log, 'utf8')
  t.regex(log, /on-finish hook failed \(exit 3\)/)
  t.regex(log, /on-finish: hook says hi/)
})

test("Puppet's disable lock refuses runs with its message; localpuppet disable and enable manage it as Puppet does", async (t) => {
  const dir = await tempDir(t)
  const state = join(dir, 'state')
  const isolate = isolatePuppet(dir)
  const args = ['apply', join(DEMO, 'input.yaml'), '--module-dir', join(DEMO, 'modules'), '--state-dir', state]
  // Real puppet disables itself; localpuppet honours it.
  await execa('puppet', ['agent', '--disable', 'kernel upgrade in progress', ...isolate])
  const refused = await cli([...args, '--', ...isolate])
  t.is(refused.exitCode, 73)
  t.is(refused.stderr, 'localpuppet: puppet is disabled: kernel upgrade in progress')
  const enabled = await cli(['enable', '--state-dir', state, '--', ...isolate])
  t.is(enabled.stdout, 'enabled (was disabled: kernel upgrade in progress)')

  // localpuppet disables; real puppet agent sees it.
  t.is((await cli(['disable', 'maintenance (ops)', '--state-dir', state, '--', ...isolate])).exitCode, 0)
  const agent = await execa('puppet', ['agent', '--test', ...isolate], {reject: false})
  t.regex(agent.stdout + agent.stderr, /administratively disabled.*maintenance \(ops\)/)
  t.is((await cli([...args, '--', ...isolate])).exitCode, 73)
  t.is((await cli(['enable', '--state-dir', state, '--', ...isolate])).exitCode, 0)
  const ran = await cli([...args, '--', ...isolate])
  t.is(ran.exitCode, 0, ran.stderr)
})

test("Puppet's catalog-run lock is held during the run, and a live one held by puppet agent refuses the run", async (t) => {
  const {fake, state, args, env} = await setup(t)
  const lock = join(fake, 'agent_catalog_run.lock')
  const run = cli(args, {env: {...env, FAKE_PUPPET_SLEEP: '8'}})
  const until = Date.now() + 60_000
  while (!existsSync(join(fake, 'puppet.pid')) && Date.now() < until) await sleep(50)
  // Read at once, while puppet certainly still runs; compared with the record after.
  const holder = (await readFile(lock, 'utf8')).trim()
  const {record} = await statusJson(state)
  t.is(holder, String(record.pid), 'held by the run, while puppet runs')
  t.is((await run).exitCode, 0)
  t.false(existsSync(lock), 'released after')

  await writeFile(lock, String(process.pid))
  const refused = await cli(args, {env})
  t.is(refused.exitCode, 73)
  // Busy, not failed: status still shows the run before; history has the trace.
  t.is((await statusJson(state)).record.state, 'succeeded')
  const [busy] = JSON.parse((await cli(['history', '--state-dir', state, '--json'])).stdout)
  t.is(busy.state, 'busy')
  t.regex(busy.error, /a Puppet catalog run is in progress \(pid \d+/)
})

test('--splay waits a random time before taking the lock, and records it', async (t) => {
  const {state, args, env} = await setup(t)
  const result = await cli([...args, '--splay', '1', '--json'], {env})
  t.is(result.exitCode, 0, result.stderr)
  const record = JSON.parse(result.stdout)
  t.true(record.splaySeconds === 0 || record.splaySeconds === 1)
  t.is((await statusJson(state)).record.splaySeconds, record.splaySeconds)
})
