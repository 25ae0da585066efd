import {driveRollout} from '../../src/lib/rollout/drive.js'
import {RolloutEngine} from '../../src/lib/rollout/engine.js'
import {RolloutStore, openRolloutsDir} from '../../src/lib/rollout/record.js'
import {rolloutSettings} from '../../src/lib/rollout/settings.js'
import {SimulatedFleet, VirtualClock} from './simulated-fleet.js'

/**
 * A rollout of app/tags/1.1.0 over nodes a, b (fails) and c, driven against a simulated
 * fleet and recorded in `<stateDir>/rollouts/` as the rollout command records one (no
 * broker), then saved as `status` (done: exit 1; interrupted: the broker went away, 69).
 * `flags` are the rollout's own (noop: true...), over those.
 */
export async function recordedRollout(stateDir: string, status: 'done' | 'interrupted' = 'done', flags: Partial<Parameters<typeof rolloutSettings>[0]> = {}) {
  const {dir} = await openRolloutsDir(stateDir, false, true)
  const settings = rolloutSettings({ref: 'app/tags/1.1.0', batch: '1', ...flags})
  const names = ['a', 'b', 'c']
  const engine = new RolloutEngine(settings, names)
  const store = RolloutStore.create(dir, {transport: {via: 'mco', mco: 'mco', connection: [], discovery: [], replyTimeout: null, discoveryTimeout: null}, settings, expected: names, expectedFrom: 'test'}, engine)
  const clock = new VirtualClock()
  const fleet = new SimulatedFleet(names.map((name) => ({name, behaviour: name === 'b' ? 'fail' : 'succeed', runMs: 2000, before: 'app/tags/1.0.0'})), clock)
  await driveRollout(engine, fleet, clock, {record: (event) => store.add(event, engine)})
  await store.save(status === 'done' ? {status, exitCode: 1} : {status, interruption: 'the broker cannot be reached', exitCode: 69})
  return {dir, store, engine}
}
