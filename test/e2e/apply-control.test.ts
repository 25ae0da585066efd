import {existsSync} from 'node:fs'
import {mkdir, readFile, writeFile} from 'node:fs/promises'
import {join} from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'

import test from 'ava'

import {FAKE_PUPPET, FIXTURES, cli, startCli, statusJson} from '../helpers/cli.js'
import {tempDir} from '../helpers/temp.js'

// Locks, signals and timeouts need a slow child: a fake puppet (fixtures/fake-puppet/puppet).
const DEMO = join(FIXTURES, 'demo')

async function setup(t: Parameters<typeof tempDir>[0]) {
  const dir = await tempDir(t)
  const fake = join(dir, 'fake')
  await mkdir(fake)
  const state = join(dir, 'state')
  const args = ['apply', join(DEMO, 'input.yaml'), '--module-dir', join(DEMO, 'modules'), '--state-dir', state, '--puppet', FAKE_PUPPET]
  return {dir, fake, state, args, env: {FAKE_PUPPET_DIR: fake}}
}

async function waitFor(path: string, timeoutMs = 120_000): Promise<string> {
  const until = Date.now() + timeoutMs
  while (Date.now() < until) {
    if (existsSync(path)) {
      const text = (await readFile(path, 'utf8')).trim()
      if (text !== '') return text
    }

    await sleep(50)
  }

  throw new Error(`${path} did not appear`)
}

/** Whether the process is still there a little later: a signalled process takes a moment to go. */
async function gone(pid: number, timeoutMs = 5000): Promise<boolean> {
  const until = Date.now() + timeoutMs
  while (alive(pid) && Date.now() < until) await sleep(50)
  return !alive(pid)
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}


test('a second apply fails at once with 73 naming the run that holds the lock', async (t) => {
  const {fake, state, args, env} = await setup(t)
  // Long enough to outlast a loaded machine's start-up of the second apply; stopped below.
  const first = startCli(args, {env: {...env, FAKE_PUPPET_SLEEP: '300'}})
  await waitFor(join(fake, 'puppet.pid'))
  const {record} = await statusJson(state)
  t.is(record.state, 'running')

  const second = await cli(args, {env})
  t.is(second.exitCode, 73)
  t.regex(second.stderr, new RegExp(`run ${record.id.replaceAll('.', '\\.')} \\(pid \\d+\\) holds the lock`))
  // Busy is not failed: status still describes the run in progress; history keeps a trace.
  const after = await statusJson(state)
  t.is(after.exitCode, 75)
  t.is(after.record.id, record.id)
  const history = JSON.parse((await cli(['history', '--state-dir', state, '--json'])).stdout)
  t.deepEqual(history.map((r: {state: string}) => r.state), ['busy', 'running'])

  first.kill('SIGTERM')
  await first
})

test('a lock left by a process that is gone is taken over', async (t) => {
  const {fake, state, args, env} = await setup(t)
  await mkdir(state, {recursive: true})
  await writeFile(join(state, 'lock'), JSON.stringify({pid: 2 ** 22 + 7, start: null, runId: 'x', acquiredAt: 'then', token: 'dead'}))
  const result = await cli(args, {env: {...env, FAKE_PUPPET_SLEEP: '0'}})
  t.is(result.exitCode, 0, result.stderr)
  t.truthy(await waitFor(join(fake, 'args')))
  t.false(existsSync(join(state, 'lock')))
})

for (const [signal, code] of [['SIGTERM', 143], ['SIGINT', 130]] as const) {
  test(`${signal} stops puppet and its children, records interrupted, releases the lock, exits ${code}`, async (t) => {
    const {fake, state, args, env} = await setup(t)
    const run = startCli(args, {env})
    const puppetPid = Number(await waitFor(join(fake, 'puppet.pid')))
    const childPid = Number(await waitFor(join(fake, 'child.pid')))
    run.kill(signal)
    const result = await run
    t.is(result.exitCode, code)
    const {exitCode, record} = await statusJson(state)
    t.is(exitCode, 1)
    t.is(record.state, 'interrupted')
    t.is(record.exitCode, code)
    t.regex(record.error, new RegExp(`interrupted by ${signal}`))
    t.false(existsSync(join(state, 'lock')))
    const sessionChildPid = Number(await waitFor(join(fake, 'session-child.pid')))
    t.true(await gone(puppetPid), 'puppet is stopped')
    t.true(await gone(childPid), "puppet's children are stopped")
    t.true(await gone(sessionChildPid), 'children in a session of their own are stopped too')
  })
}

test('--timeout stops puppet, says so, and exits 75', async (t) => {
  const {fake, state, args, env} = await setup(t)
  const result = await cli([...args, '--timeout', '1'], {env})
  t.is(result.exitCode, 75)
  t.regex(result.stderr, /timed out after 1s/)
  const {record} = await statusJson(state)
  t.is(record.state, 'interrupted')
  t.regex(record.error, /timed out after 1s/)
  t.true(await gone(Number(await waitFor(join(fake, 'child.pid')))))
  t.true(await gone(Number(await waitFor(join(fake, 'session-child.pid')))))
})

test('a --timeout longer than a timer can keep (34 days; 2^31 ms is 24.8) is as good as none: puppet runs to its end (was stopped at once, 75)', async (t) => {
  const {args, env} = await setup(t)
  const result = await cli([...args, '--timeout', '3000000'], {env: {...env, FAKE_PUPPET_SLEEP: '1'}})
  t.is(result.exitCode, 0, result.stderr)
  t.notRegex(result.stderr, /TimeoutOverflowWarning|timed out/)
})

test('puppet that is not installed exits 69 and is recorded as refused', async (t) => {
  const {dir, state} = await setup(t)
  const result = await cli(['apply', join(DEMO, 'input.yaml'), '--module-dir', join(DEMO, 'modules'), '--state-dir', state, '--puppet', join(dir, 'nope')])
  t.is(result.exitCode, 69)
  t.regex(result.stderr, /^localpuppet: puppet not found: .*nope$/m)
  t.notRegex(result.stderr, /warning/)
  const {exitCode, record} = await statusJson(state)
  t.is(exitCode, 1)
  t.is(record.state, 'refused')
  t.is(record.exitCode, 69)
  t.regex(record.error, /puppet not found/)
})

test('puppet is started with the plan\'s exact command, stdin closed, and -- arguments last before the manifest', async (t) => {
  const {fake, state, args, env} = await setup(t)
  const result = await cli([...args, '--noop', '--', '--debug', '--tags', 'a b'], {env: {...env, FAKE_PUPPET_SLEEP: '0'}})
  t.is(result.exitCode, 0, result.stderr)
  const received = (await readFile(join(fake, 'args'), 'utf8')).trimEnd().split('\n')
  const {record} = await statusJson(state)
  t.deepEqual([FAKE_PUPPET, ...received], record.command)
  t.deepEqual(received.slice(-5), ['--noop', '--debug', '--tags', 'a b', received.at(-1)])
  t.true(received.includes('--node_terminus') && received.includes('--external_nodes'))
  t.true(record.noop)
})

test('history lists runs newest first, as a table or as records', async (t) => {
  const {state, args, env} = await setup(t)
  for (let i = 0; i < 3; i++) t.is((await cli(args, {env: {...env, FAKE_PUPPET_SLEEP: '0', FAKE_PUPPET_EXIT: i === 1 ? '4' : '0'}})).exitCode, i === 1 ? 1 : 0)
  const json = await cli(['history', '--state-dir', state, '--json'])
  const records = JSON.parse(json.stdout)
  t.deepEqual(records.map((r: {state: string}) => r.state), ['succeeded', 'failed', 'succeeded'])
  t.true(records[0].id > records[1].id && records[1].id > records[2].id)
  const limited = JSON.parse((await cli(['history', '--state-dir', state, '--json', '--limit', '1'])).stdout)
  t.is(limited.length, 1)
  t.is(limited[0].id, records[0].id)
  const table = await cli(['history', '--state-dir', state])
  const lines = table.stdout.split('\n')
  t.regex(lines[0], /^RUN\s+STATE\s+RELEASE\s+STARTED\s+DURATION\s+CHANGED\s+FAILED$/)
  t.regex(lines[2], new RegExp(`^${records[1].id.replaceAll('.', '\\.')}\\s+failed\\s+foo/tags/1\\.4\\.0`))
})

test('after localpuppet is killed -9, the lock stays held while its orphaned puppet still runs', async (t) => {
  const {fake, state, args, env} = await setup(t)
  const first = startCli(args, {env: {...env, FAKE_PUPPET_SLEEP: '300'}})
  const puppetPid = Number(await waitFor(join(fake, 'puppet.pid')))
  const {record} = await statusJson(state)
  // Wait until the lock names puppet, then kill localpuppet itself without a chance to clean up.
  const until = Date.now() + 15_000
  while (!(await readFile(join(state, 'lock'), 'utf8')).includes('"group"') && Date.now() < until) await sleep(50)
  process.kill(record.pid, 'SIGKILL')
  await first
  t.true(alive(puppetPid), 'the orphaned puppet is still running')
  const second = await cli(args, {env: {...env, FAKE_PUPPET_SLEEP: '0'}})
  t.is(second.exitCode, 73, 'no second puppet alongside the orphan')
  try {
    process.kill(-puppetPid, 'SIGKILL')
  } catch {}

  t.true(await gone(puppetPid))
  const third = await cli(args, {env: {...env, FAKE_PUPPET_SLEEP: '0'}})
  t.is(third.exitCode, 0, 'once it is gone, the stale lock is taken over')
})
