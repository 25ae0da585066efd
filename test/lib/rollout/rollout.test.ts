import {mkdtemp, rm} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'

import test from 'ava'

import {readFleetMemory} from '../../../src/lib/rollout/record.js'
import {expectedFleet} from '../../../src/lib/rollout/rollout.js'
import {fakeMco, reply} from '../../helpers/fake-mco.js'

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
