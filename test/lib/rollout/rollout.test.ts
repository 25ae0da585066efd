import test from 'ava'

import {RolloutEngine} from '../../../src/lib/rollout/engine.js'
import {expectedFleet} from '../../../src/lib/rollout/rollout.js'
import {rolloutSettings} from '../../../src/lib/rollout/settings.js'
import type {McoTransport} from '../../../src/lib/rollout/transports/mco.js'
import {tempDir} from '../../helpers/temp.js'

// Issue 32: nodes go in natural name order, db2 before db10, so the canary and each batch
// are the nodes a person reading the list expects.

test('the fleet is in natural name order, and so are the canaries and the batches cut from it', async (t) => {
  const report = {pointer: 'foo/tags/1.0.0', applied: 'foo/tags/1.0.0', newest: null}
  const answers = Object.fromEntries(['db10', 'web1', 'db2', 'db1', 'web10', 'web2', 'db9'].map((node) => [node, report]))
  const transport = {options: {discovery: ['-W', 'role=db'], connection: []}, discover: async () => answers} as unknown as McoTransport
  const fleet = await expectedFleet(transport, await tempDir(t), {warn: () => {}})
  t.deepEqual(fleet.expected, ['db1', 'db2', 'db9', 'db10', 'web1', 'web2', 'web10'])
  const engine = new RolloutEngine(rolloutSettings({ref: 'foo/tags/1.1.0', canary: 1, batch: '2'}), fleet.expected)
  engine.handle({kind: 'surveyed', at: 0, answers: fleet.answers})
  const groups = engine.state.groups.map((group) => group.map((i) => engine.state.nodes[i].node))
  t.deepEqual(groups, [['db1'], ['db2', 'db9'], ['db10', 'web1'], ['web2', 'web10']])
  t.deepEqual(engine.next(0), [{kind: 'start', nodes: ['db1']}])
})
