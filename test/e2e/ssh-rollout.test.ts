import {cp, readFile, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import test from 'ava'

import {FIVE_NODES, row} from '../helpers/fleet.js'
import {
  base,
  knownHosts,
  knownHostsLine,
  inventory,
  missingPackages,
  node,
  nodes,
  onNode,
  operator,
  runIds,
  sshFlags,
  startOperator,
  startSshFleet,
  startSshd,
  stopSshFleet,
  stopSshd,
} from '../helpers/ssh-fleet.js'

/*
 * Rollouts over SSH against real sshd on 127.0.0.1: five daemons (db1, db2: role=db;
 * web1, web2, web3: role=web), each on its own port with its own host key, each standing
 * for one node with its own localpuppet configuration (SetEnv in its sshd_config), running
 * real Puppet 7.23. db2's sshd wraps every command in a shell that prints a banner and a
 * goodbye, braces included, on stdout. The scenarios of the MCollective e2e test: a failing
 * canary reverted, a budget, a stopped node, SIGKILL then --resume; and a changed host key.
 */

const OVERALL_MS = 15 * 60_000
const unavailable = await missingPackages()
if (unavailable) console.warn(`ssh-rollout.test.ts: skipping the SSH fleet tests: ${unavailable}`)
const sshTest = unavailable ? test.serial.skip : test.serial
const skipped = unavailable ? ` (${unavailable})` : ''

const fleet = () => [...sshFlags(), '--inventory', inventory()]

/** The releases each node's run records name, oldest first. */
async function releasesRun(name: string): Promise<string[]> {
  const records = await Promise.all((await runIds(name)).map(async (id) => JSON.parse(await readFile(join(node(name).state, 'runs', id, 'run.json'), 'utf8'))))
  return records.map((record) => `${record.state} ${record.release}`)
}

test.before(async () => {
  if (unavailable) return
  await startSshFleet(
    FIVE_NODES,
    OVERALL_MS,
    {db2: ['ForceCommand /bin/sh -c \'echo "Welcome to db2 {\\"id\\": \\"forged\\"}"; eval "$SSH_ORIGINAL_COMMAND"; s=$?; echo "bye {"; exit $s\'']},
  )
  // foo 1.6.0 (a notify), 1.7.0 (fails to compile), 1.8.0 (naps 6 s) in every node's module dir.
  for (const entry of nodes) {
    for (const [tag, body] of [
      ['1.6.0', "  notify { 'foo 1.6.0': }\n"],
      ['1.7.0', "  fail('foo 1.7.0 is broken')\n"],
      ['1.8.0', "  exec { 'nap': command => '/bin/sleep 6', path => ['/bin', '/usr/bin'] }\n"],
    ]) {
      const dir = join(entry.dir, 'modules', 'foo', 'tags', tag)
      await cp(join(entry.dir, 'modules', 'foo', 'tags', '1.4.0'), dir, {recursive: true})
      await writeFile(join(dir, 'foo', 'manifests', 'init.pp'), `class foo (Integer $port = 80) {\n${body}}\n`)
    }
  }
})

test.after.always(stopSshFleet)

sshTest(`rollout --via ssh --batch 2 over real sshd: every node runs the release once, a node whose shell prints a banner included; fleet status --via ssh agrees${skipped}`, async (t) => {
  t.timeout(OVERALL_MS)
  const started = Date.now()
  const rollout = await operator(['rollout', 'foo/tags/1.6.0', '--batch', '2', ...fleet(), '--json'])
  const elapsed = Date.now() - started
  t.is(rollout.exitCode, 0, rollout.stdout + rollout.stderr)
  for (const entry of nodes) {
    t.like(row(rollout, entry.name), {state: 'succeeded', applied: 'foo/tags/1.6.0'}, entry.name)
    t.deepEqual(await releasesRun(entry.name), ['succeeded foo/tags/1.6.0'], `${entry.name} ran once`)
  }

  // The overhead: elapsed over the sum of each batch's slowest run (db1 db2 | web1 web2 | web3).
  const durations = Object.fromEntries(nodes.map((entry) => [entry.name, row(rollout, entry.name).durationMs as number]))
  const slowest = [['db1', 'db2'], ['web1', 'web2'], ['web3']].reduce((sum, batch) => sum + Math.max(...batch.map((name) => durations[name])), 0)
  // A release's first run on each node, its verification included (BENCH=ssh measures warm rollouts).
  t.log(`5 nodes, --batch 2, a release new to every node: ${elapsed} ms elapsed, ${slowest} ms of slowest runs: ratio ${(elapsed / slowest).toFixed(2)}`)

  const status = await operator(['fleet', 'status', ...fleet(), '--json'])
  t.deepEqual(status.json.noAnswer, [], status.stderr)
  t.is(status.json.byApplied['foo/tags/1.6.0'], 5)
})

sshTest(`a canary that fails to compile is stopped and reverted over SSH; the other nodes never start${skipped}`, async (t) => {
  t.timeout(OVERALL_MS)
  const before = Object.fromEntries(await Promise.all(nodes.map(async (entry) => [entry.name, await runIds(entry.name)] as const)))
  const broken = await operator(['rollout', 'foo/tags/1.7.0', '--canary', '1', '--batch', '2', ...fleet(), '--json'])
  t.is(broken.exitCode, 1, broken.stdout + broken.stderr)
  const canary = row(broken, 'db1')
  t.is(canary.state, 'failed')
  t.regex(canary.message, /^Error: .*foo 1\.7\.0 is broken/, "Puppet's own first error line")
  t.like(canary.revert, {state: 'succeeded', release: 'foo/tags/1.6.0'})
  t.regex(broken.json.stopped, /db1 failed/)
  for (const name of ['db2', 'web1', 'web2', 'web3']) {
    t.is(row(broken, name).state, 'not started', name)
    t.deepEqual(await runIds(name), before[name], `${name} never started`)
  }

  t.deepEqual((await releasesRun('db1')).slice(-2), ['failed foo/tags/1.7.0', 'succeeded foo/tags/1.6.0'], 'the failed run, then the revert')
})

sshTest(`--max-failures 1 rides out a disabled node (refused, 73), --only-outdated then runs only it; a changed host key is a refusal naming the node (77), never a prompt${skipped}`, async (t) => {
  t.timeout(OVERALL_MS)
  t.is((await onNode('web1', ['disable', 'maintenance (ops)'])).exitCode, 0)
  const tolerated = await operator(['rollout', 'foo/tags/1.4.0', '--batch', '2', '--max-failures', '1', ...fleet(), '--json'])
  t.is(tolerated.exitCode, 1, 'not every node is on 1.4.0')
  t.is(tolerated.json.stopped, null)
  t.like(row(tolerated, 'web1'), {state: 'refused', exitCode: 73})
  t.regex(row(tolerated, 'web1').message, /maintenance \(ops\)/)
  for (const name of ['db1', 'db2', 'web2', 'web3']) t.like(row(tolerated, name), {state: 'succeeded', applied: 'foo/tags/1.4.0'}, name)
  t.is((await onNode('web1', ['enable'])).exitCode, 0)

  // --only-outdated: only web1, the node the budget rode out, runs.
  const counts = Object.fromEntries(await Promise.all(nodes.map(async (entry) => [entry.name, (await runIds(entry.name)).length] as const)))
  const outdated = await operator(['rollout', 'foo/tags/1.4.0', '--only-outdated', ...fleet(), '--json'])
  t.is(outdated.exitCode, 0, outdated.stdout + outdated.stderr)
  t.is(row(outdated, 'web1').state, 'succeeded')
  for (const name of ['db1', 'db2', 'web2', 'web3']) {
    t.is(row(outdated, name).state, 'up to date', name)
    t.is((await runIds(name)).length, counts[name], `${name} did not run`)
  }

  // web2's daemon now shows a host key other than the one known for it.
  const known = await readFile(knownHosts(), 'utf8')
  const web2 = node('web2')
  const other = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMYoTnd1dvqSOiFSHbpIbCbWe4MxmrBXmLpy0zZRWpzL'
  await writeFile(knownHosts(), known.split('\n').map((line) => (line.startsWith(`[127.0.0.1]:${web2.sshPort} `) ? knownHostsLine(web2, other) : line)).join('\n'))
  t.teardown(() => writeFile(knownHosts(), known))
  const runsBefore = await runIds('web2')
  const refused = await operator(['rollout', 'foo/tags/1.6.0', '--max-failures', '1', ...fleet(), '--json'])
  t.is(refused.exitCode, 1, refused.stdout + refused.stderr)
  t.like(row(refused, 'web2'), {state: 'refused', exitCode: 77})
  t.regex(row(refused, 'web2').message, new RegExp(`host key of 127\\.0\\.0\\.1 port ${web2.sshPort} has changed \\(REMOTE HOST IDENTIFICATION HAS CHANGED\\)`))
  t.regex(refused.stderr, /web2: the SSH host key of .* has changed/, 'said once, naming the node')
  t.deepEqual(await runIds('web2'), runsBefore, 'nothing ran on web2')
  for (const name of ['db1', 'db2', 'web1', 'web3']) t.is(row(refused, name).state, 'succeeded', name)
})

sshTest(`a node whose sshd is stopped is "no answer" within the connect timeout, in fleet status and in a rollout${skipped}`, async (t) => {
  t.timeout(OVERALL_MS)
  const web3 = node('web3')
  await stopSshd(web3)
  t.teardown(() => startSshd(web3))
  const status = await operator(['fleet', 'status', ...fleet(), '--json'])
  t.is(status.exitCode, 1)
  t.deepEqual(status.json.noAnswer, ['web3'])
  const whole = await operator(['rollout', 'foo/tags/1.6.0', '--max-failures', '1', '--deadline', '40s', ...fleet(), '--json'])
  t.is(whole.exitCode, 1, whole.stdout + whole.stderr)
  t.is(row(whole, 'web3').state, 'no answer')
  t.is(whole.json.stopped, null, 'one silent node is within --max-failures 1')
  for (const name of ['db1', 'db2', 'web1', 'web2']) t.like(row(whole, name), {state: 'succeeded', applied: 'foo/tags/1.6.0'}, name)
})

sshTest(`a rollout over SSH killed with SIGKILL in the middle is resumed from its record: runs in flight are polled, no node runs twice${skipped}`, async (t) => {
  t.timeout(OVERALL_MS)
  const counts = Object.fromEntries(await Promise.all(nodes.map(async (entry) => [entry.name, (await runIds(entry.name)).length] as const)))
  const first = startOperator(['rollout', 'foo/tags/1.8.0', '--batch', '2', ...fleet(), '--json'])
  let id: string | undefined
  for (let i = 0; i < 600 && id === undefined; i++) {
    await new Promise((resolve) => setTimeout(resolve, 200))
    const newest = (await operator(['rollout', 'list', '--json'])).json?.[0]
    if (newest?.ref === 'foo/tags/1.8.0' && newest.nodes.some((entry: {state: string}) => entry.state === 'running')) id = newest.id
  }

  t.truthy(id, 'the rollout recorded running nodes')
  first.kill('SIGKILL')
  await first
  const resumed = await operator(['rollout', '--resume', id!, '--json'])
  t.is(resumed.exitCode, 0, resumed.stdout + resumed.stderr)
  for (const entry of nodes) {
    t.is(row(resumed, entry.name).state, 'succeeded', entry.name)
    t.deepEqual((await releasesRun(entry.name)).slice(counts[entry.name]), ['succeeded foo/tags/1.8.0'], `${entry.name} ran once`)
  }
})

sshTest(`rollout revert ID over SSH, the nodes named in a --nodes file and reached through the Host aliases of the ssh configuration: each goes back to the release it had${skipped}`, async (t) => {
  t.timeout(OVERALL_MS)
  const dbs = join(base, 'dbs.txt')
  await writeFile(dbs, '# the databases\ndb1\ndb2\n')
  const viaNodes = [...sshFlags(), '--nodes', dbs]
  const onOld = await operator(['rollout', 'foo/tags/1.3.0', ...viaNodes, '--json'])
  t.is(onOld.exitCode, 0, onOld.stdout + onOld.stderr)
  const moved = await operator(['rollout', 'foo/tags/1.4.0', ...viaNodes, '--json'])
  t.is(moved.exitCode, 0, moved.stdout + moved.stderr)
  for (const name of ['db1', 'db2']) t.like(row(moved, name), {before: 'foo/tags/1.3.0', applied: 'foo/tags/1.4.0'}, name)

  const reverted = await operator(['rollout', 'revert', moved.json.id, '--json'])
  t.is(reverted.exitCode, 0, reverted.stdout + reverted.stderr)
  t.like(reverted.json, {reverts: moved.json.id, ok: true, groups: [{release: 'foo/tags/1.3.0', nodes: ['db1', 'db2']}]})
  for (const name of ['db1', 'db2']) t.deepEqual((await releasesRun(name)).slice(-1), ['succeeded foo/tags/1.3.0'], `${name}: its newest run is the rollback`)
  const status = await operator(['fleet', 'status', ...viaNodes, '--json'])
  for (const name of ['db1', 'db2']) t.is(row(status, name).applied, 'foo/tags/1.3.0', name)
  t.regex(status.json.expectedFrom ?? '', /--nodes .*dbs\.txt \(2\)/)
})
