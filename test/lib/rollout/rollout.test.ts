import {mkdtemp, rm} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'

import test from 'ava'

import {RolloutEngine} from '../../../src/lib/rollout/engine.js'
import {expectedFleet, readFleetMemory} from '../../../src/lib/rollout/expected-fleet.js'
import {rolloutSettings} from '../../../src/lib/rollout/settings.js'
import type {FleetTransport} from '../../../src/lib/rollout/transports/transport.js'
import {fakeMco, reply} from '../../helpers/fake-mco.js'
import {tempDir} from '../../helpers/temp.js'

// Issue 32: nodes go in natural name order, db2 before db10, so the canary and each batch
// are the nodes a person reading the list expects.

test('the fleet is in natural name order, and so are the canaries and the batches cut from it', async (t) => {
  const report = {pointer: 'foo/tags/1.0.0', applied: 'foo/tags/1.0.0', newest: null}
  const answers = Object.fromEntries(['db10', 'web1', 'db2', 'db1', 'web10', 'web2', 'db9'].map((node) => [node, report]))
  const transport = {fleetKey: JSON.stringify({connection: [], discovery: ['-W', 'role=db']}), nodesFile: null, discover: async () => answers} as unknown as FleetTransport
  const fleet = await expectedFleet(transport, await tempDir(t), {warn: () => {}})
  t.deepEqual(fleet.expected, ['db1', 'db2', 'db9', 'db10', 'web1', 'web2', 'web10'])
  const engine = new RolloutEngine(rolloutSettings({ref: 'foo/tags/1.1.0', canary: 1, batch: '2'}), fleet.expected)
  engine.handle({kind: 'surveyed', at: 0, answers: fleet.answers})
  const groups = engine.state.groups.map((group) => group.map((i) => engine.state.nodes[i].node))
  t.deepEqual(groups, [['db1'], ['db2', 'db9'], ['db10', 'web1'], ['web2', 'web10']])
  t.deepEqual(engine.next(0), [{kind: 'start', nodes: ['db1']}])
})

test('a --batch percentage is of the nodes left after the canaries, rounded down: --canary 1 --batch 50% on 10 nodes is 1, then 4, 4 and 1', (t) => {
  const names = Array.from({length: 10}, (_, i) => `web${i + 1}`)
  const engine = new RolloutEngine(rolloutSettings({ref: 'foo/tags/1.1.0', canary: 1, batch: '50%'}), names)
  engine.handle({kind: 'surveyed', at: 0, answers: {}})
  t.deepEqual(engine.state.groups.map((group) => group.length), [1, 4, 4, 1])
  t.deepEqual(engine.state.groups[1].map((i) => engine.state.nodes[i].node), ['web2', 'web3', 'web4', 'web5'])
})

test('a reply from a sender that is no node name is ignored with a warning that shows it escaped on one line', async (t) => {
  const report = {pointer: null, applied: null, newest: null}
  const evil = 'web1\u202E\u009B2J\nFORGED'
  const transport = {fleetKey: JSON.stringify({connection: [], discovery: []}), nodesFile: null, discover: async () => ({web1: report, [evil]: report})} as unknown as FleetTransport
  const warnings: string[] = []
  const fleet = await expectedFleet(transport, await tempDir(t), {warn: (line) => warnings.push(line)})
  t.deepEqual(fleet.expected, ['web1'])
  t.deepEqual(warnings, ['ignored a reply from "web1\\u202e\\u009b2J\\nFORGED": not a node name'])
})

const status = (node: string) => reply(node, {pointer: 'foo/tags/1.1.0', applied: 'foo/tags/1.1.0'})

// Issue 32, item 3: `-I web7 -I web8` with web7's daemon stopped rolled out to web8 alone, exit 0.
test('nodes named with -I are expected, like --nodes: one that does not answer is in the fleet (no answer), and is not forgotten', async (t) => {
  const memory = await mkdtemp(join(tmpdir(), 'localpuppet-fleet-memory-'))
  t.teardown(() => rm(memory, {recursive: true, force: true}))
  const warn = () => {}
  const named = await fakeMco(t, [status('web8'), status('web9')], 0, '', {discovery: ['-I', 'web7', '-I', 'web8']})
  const fleet = await expectedFleet(named.transport, memory, {warn})
  t.deepEqual(fleet.expected, ['web7', 'web8'])
  t.deepEqual(Object.keys(fleet.answers), ['web8'], 'a reply from a node not named is not taken')
  t.regex(fleet.expectedFrom, /web7 did not answer/)
  // With another filter too, the named node is still expected, and remembered with the rest.
  const mixed = await fakeMco(t, [status('web8')], 0, '', {discovery: ['-W', 'role=web', '-I', 'web7', '-I', 'web8']})
  const both = await expectedFleet(mixed.transport, memory, {warn})
  t.deepEqual(both.expected, ['web7', 'web8'])
  await both.remember()
  t.deepEqual(Object.values(await readFleetMemory(memory)).map((entry) => entry.nodes), [['web7', 'web8']])
  // A regular expression names no node: discovery decides.
  const pattern = await fakeMco(t, [status('web8')], 0, '', {discovery: ['-I', '/web[78]/']})
  t.deepEqual((await expectedFleet(pattern.transport, memory, {warn})).expected, ['web8'])
})

test("a listed fleet (SSH's --targets, --nodes, --inventory) is exactly its list in natural order: a silent node is expected, an answer from another is not believed, nothing is remembered", async (t) => {
  const report = {pointer: 'foo/tags/1.0.0', applied: 'foo/tags/1.0.0', newest: null}
  const dir = await tempDir(t)
  const transport = {fleetKey: 'ssh', nodesFile: null, listed: {nodes: ['web10', 'web2', 'web1'], from: '--inventory fleet.yaml'}, discover: async () => ({web1: report, intruder: report})} as unknown as FleetTransport
  const fleet = await expectedFleet(transport, dir, {warn: () => {}})
  t.deepEqual(fleet.expected, ['web1', 'web2', 'web10'])
  t.deepEqual(Object.keys(fleet.answers), ['web1'])
  t.is(fleet.expectedFrom, '--inventory fleet.yaml (3)')
  await fleet.remember()
  t.deepEqual(await readFleetMemory(join(dir)), {})
})

test('a wait longer than a timer keeps (a --soak of 30 days) is a long wait, not none: the clock does not wake at once', async (t) => {
  const {systemClock} = await import('../../../src/lib/rollout/rollout.js')
  const stop = new AbortController()
  let woke = false
  const sleeping = systemClock.sleep(30 * 86_400_000, stop.signal).then(() => (woke = true))
  await new Promise((resolve) => setTimeout(resolve, 200))
  t.false(woke, 'woke before it was stopped')
  stop.abort()
  await sleeping
  t.true(woke)
})
