import test from 'ava'
import fc from 'fast-check'

import {driveRollout} from '../../../src/lib/rollout/drive.js'
import {type RolloutEvent, RolloutEngine} from '../../../src/lib/rollout/engine.js'
import type {RolloutRecord} from '../../../src/lib/rollout/record.js'
import {appliedByNode} from '../../../src/lib/rollout/record-view.js'
import {rolloutSettings} from '../../../src/lib/rollout/settings.js'
import {type Behaviour, SimulatedFleet, VirtualClock} from '../../helpers/simulated-fleet.js'

// Issue 32, 5: the rollout's applied is what the node itself would say it applied (its
// newest run that succeeded without --noop), whatever became of the rollout's run.

const BEHAVIOURS: Behaviour[] = ['succeed', 'fail', 'refuse', 'busy-once', 'busy-always', 'silent', 'hang', 'vanish', 'sours', 'slow-start', 'overtaken']

test('property: after any rollout, each node that answers has applied exactly what appliedByNode reads from the record', async (t) => {
  await fc.assert(
    fc.asyncProperty(
      fc.array(fc.constantFrom(...BEHAVIOURS), {minLength: 1, maxLength: 12}),
      fc.record({
        canary: fc.nat(2),
        batch: fc.constantFrom('1', '2', '50%', '100%'),
        'max-failures': fc.constantFrom('0', '1', '50%'),
        revert: fc.constantFrom('failed', 'all', 'none'),
        soak: fc.constantFrom(undefined, '1m'),
        deadline: fc.constantFrom('2m', '10m'),
      }),
      fc.boolean(),
      async (behaviours, flags, noBefore) => {
        const names = behaviours.map((_, i) => `n${i + 1}`)
        const settings = rolloutSettings({ref: 'app/tags/1.1.0', ...flags, canary: flags.canary || undefined})
        const clock = new VirtualClock()
        const fleet = new SimulatedFleet(names.map((name, i) => ({name, behaviour: behaviours[i], runMs: 5000, before: noBefore && i === 0 ? null : 'app/tags/1.0.0'})), clock)
        const engine = new RolloutEngine(settings, names)
        const events: RolloutEvent[] = []
        await driveRollout(engine, fleet, clock, {record: async (event) => void events.push(structuredClone(event))})
        const record = {settings, state: engine.state, events} as unknown as RolloutRecord
        const read = appliedByNode(record)
        // Long after: every run the fleet will ever finish has finished.
        clock.time += 3_600_000
        const truth = await fleet.survey(names)
        for (const [node, answer] of Object.entries(truth)) {
          // A run still going when the rollout ended (hang) is not known to the record; nothing of it succeeded either.
          t.is(read.get(node), answer.applied, `${node} (${behaviours[names.indexOf(node)]})`)
        }
      },
    ),
    {numRuns: 150},
  )
})

test('a --noop rollout applied nothing, whatever its runs did', async (t) => {
  const names = ['a', 'b']
  const settings = rolloutSettings({ref: 'app/tags/1.1.0', noop: true})
  const clock = new VirtualClock()
  const fleet = new SimulatedFleet(names.map((name) => ({name, behaviour: 'succeed' as const, runMs: 1000, before: 'app/tags/1.0.0'})), clock)
  const engine = new RolloutEngine(settings, names)
  const events: RolloutEvent[] = []
  await driveRollout(engine, fleet, clock, {record: async (event) => void events.push(event)})
  t.deepEqual([...appliedByNode({settings, state: engine.state, events} as unknown as RolloutRecord)], [
    ['a', 'app/tags/1.0.0'],
    ['b', 'app/tags/1.0.0'],
  ])
})
