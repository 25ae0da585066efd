import {strict as assert} from 'node:assert'

import test from 'ava'
import fc from 'fast-check'

import {driveRollout, replayEvents} from '../../../src/lib/rollout/drive.js'
import {FINAL_STATES, type NodeState, type RolloutEvent, RolloutEngine} from '../../../src/lib/rollout/engine.js'
import {rolloutExitCode} from '../../../src/lib/rollout/rollout.js'
import {type RolloutSettings, cutBatches, parseBatch, parseStep, stepSize} from '../../../src/lib/rollout/settings.js'
import {type Behaviour, Killed, type SimNodeSpec, SimulatedFleet, VirtualClock} from '../../helpers/simulated-fleet.js'

const REF = 'app/tags/1.1.0'
const BEFORE = 'app/tags/1.0.0'

function settings(overrides: Partial<RolloutSettings> = {}): RolloutSettings {
  return {
    ref: REF,
    canary: 0,
    batch: [{percent: 100}],
    window: null,
    maxFailures: {count: 0},
    soakMs: 0,
    deadlineMs: 600_000,
    revert: 'failed',
    onlyOutdated: false,
    noop: false,
    fetch: false,
    save: false,
    timeoutSeconds: null,
    busyRetryMs: 30_000,
    ...overrides,
  }
}

const specs = (behaviours: Behaviour[], runMs = 5000): SimNodeSpec[] =>
  behaviours.map((behaviour, i) => ({name: `n${String(i).padStart(5, '0')}`, behaviour, runMs, before: BEFORE}))

interface Outcome {
  engine: RolloutEngine
  fleet: SimulatedFleet
  events: RolloutEvent[]
  /** Nodes in flight above what the batch or window allows, and starts after the budget was spent. */
  violations: string[]
}

/** The largest number of nodes that may be in flight at once in the group the engine is on. */
function limit(engine: RolloutEngine, group: number): number {
  const {settings: s, state} = engine
  if (s.window !== null && !(s.canary > 0 && group === 0)) return s.window
  return state.groups[group]?.length ?? 0
}

async function simulate(specList: SimNodeSpec[], s: RolloutSettings, options: {stopAfter?: number; fleet?: SimulatedFleet; engine?: RolloutEngine; events?: RolloutEvent[]} = {}): Promise<Outcome> {
  const clock = options.fleet?.clock ?? new VirtualClock()
  const fleet = options.fleet ?? new SimulatedFleet(specList, clock)
  const engine = options.engine ?? new RolloutEngine(s, specList.map((spec) => spec.name))
  const events = options.events ?? []
  const violations: string[] = []
  const controller = new AbortController()
  let stoppedSeen = engine.state.stopped !== null
  await driveRollout(engine, fleet, clock, {
    signal: controller.signal,
    async record(event) {
      if (event.kind === 'dispatched' && event.purpose === 'apply' && stoppedSeen) violations.push(`started ${event.nodes.join(',')} after the budget was spent`)
      stoppedSeen ||= engine.state.stopped !== null
      events.push(structuredClone(event))
      if (options.stopAfter !== undefined && events.length >= options.stopAfter) controller.abort()
    },
    progress(current) {
      const byGroup = new Map<number, number>()
      for (const node of current.state.nodes) {
        if ((node.state === 'starting' || node.state === 'running') && node.group !== null) byGroup.set(node.group, (byGroup.get(node.group) ?? 0) + 1)
      }

      if (byGroup.size > 1) violations.push(`nodes of ${byGroup.size} groups in flight at once`)
      for (const [group, count] of byGroup) if (count > limit(current, group)) violations.push(`${count} in flight in group ${group}, limit ${limit(current, group)}`)
    },
  })
  return {engine, fleet, events, violations}
}

const finalStates = (engine: RolloutEngine) => engine.state.nodes.map((node) => [node.node, node.state, node.runId, node.revert?.state ?? null])
const stateOf = (engine: RolloutEngine, name: string): NodeState => engine.node(name)!.state

// ---- settings ----

test('--batch is Ansible serial: sizes in turn, the last repeated; percentages of the nodes, rounded down but never empty', (t) => {
  t.deepEqual(parseBatch('1,5,25%,100%'), [{count: 1}, {count: 5}, {percent: 25}, {percent: 100}])
  const nodes = Array.from({length: 40}, (_, i) => i)
  t.deepEqual(cutBatches(nodes, parseBatch('1,5,25%,100%')).map((group) => group.length), [1, 5, 10, 24])
  t.deepEqual(cutBatches(nodes, parseBatch('10')).map((group) => group.length), [10, 10, 10, 10])
  t.deepEqual(cutBatches([1, 2, 3], parseBatch('1%')).map((group) => group.length), [1, 1, 1])
  t.is(stepSize(parseStep('5%', '--max-failures', true), 200, 0), 10)
  t.is(stepSize(parseStep('5%', '--max-failures', true), 10, 0), 0)
  for (const bad of ['', '0', '1,,2', '101%', 'x', '-1', '2.5']) t.throws(() => parseBatch(bad), {message: /--batch/}, bad)
})

// ---- examples ----

test('a canary that fails stops the rollout: it is reverted to the release it had, and no other node starts', async (t) => {
  const {engine, fleet, violations} = await simulate(specs(['fail', 'succeed', 'succeed', 'succeed']), settings({canary: 1, batch: [{count: 2}]}))
  t.deepEqual(violations, [])
  t.is(stateOf(engine, 'n00000'), 'failed')
  t.regex(engine.node('n00000')!.message!, /Error: Evaluation Error/)
  t.deepEqual(engine.node('n00000')!.revert?.state, 'succeeded')
  t.is(engine.node('n00000')!.revert?.release, BEFORE)
  for (const name of ['n00001', 'n00002', 'n00003']) t.is(stateOf(engine, name), 'not started')
  t.deepEqual(fleet.started, [['n00000', 'apply', REF], ['n00000', 'revert', BEFORE]])
  t.regex(engine.state.stopped!, /n00000 failed.*--max-failures 0/)
})

test('--max-failures 1 with one disabled node: the rollout goes on to the end and says the budget held', async (t) => {
  const {engine} = await simulate(specs(['succeed', 'refuse', 'succeed', 'succeed', 'succeed']), settings({batch: [{count: 2}], maxFailures: {count: 1}}))
  t.is(engine.state.stopped, null)
  t.deepEqual(engine.state.nodes.map((node) => node.state), ['succeeded', 'refused', 'succeeded', 'succeeded', 'succeeded'])
  t.is(engine.node('n00001')!.exitCode, 73)
  t.is(engine.node('n00001')!.revert, null, 'a refused node ran nothing: nothing to put back')
})

test('a busy node is tried once more later and not counted; busy twice, it stays busy (its own state, never refused)', async (t) => {
  const {engine, fleet} = await simulate(specs(['busy-once', 'busy-always', 'succeed']), settings({maxFailures: {count: 0}}))
  t.is(stateOf(engine, 'n00000'), 'succeeded')
  t.is(stateOf(engine, 'n00001'), 'busy')
  t.is(stateOf(engine, 'n00002'), 'succeeded')
  t.is(engine.state.stopped, null, 'busy does not spend the budget')
  t.is(fleet.nodes.get('n00001')!.starts, 2, 'tried exactly twice')
})

test('a node whose run never finishes is failed at its deadline, and one that never answers is "no answer"; both count', async (t) => {
  const clock = new VirtualClock()
  const fleet = new SimulatedFleet(specs(['hang', 'silent', 'succeed']), clock)
  const start = clock.now()
  const {engine} = await simulate([], settings({deadlineMs: 120_000, maxFailures: {count: 5}}), {fleet, engine: new RolloutEngine(settings({deadlineMs: 120_000, maxFailures: {count: 5}}), ['n00000', 'n00001', 'n00002'])})
  t.is(stateOf(engine, 'n00000'), 'deadline')
  t.regex(engine.node('n00000')!.message!, /--deadline 120s/)
  t.is(stateOf(engine, 'n00001'), 'no answer')
  t.is(stateOf(engine, 'n00002'), 'succeeded')
  // Its revert waits for the run that never ends, as long as a run may last (an hour without --timeout), and says it did not revert.
  t.like(engine.node('n00000')!.revert, {state: 'deadline'})
  t.regex(engine.node('n00000')!.revert!.message!, /late run n00000-1 did not end within 60 min more: not reverted \(that run may still land app\/tags\/1\.1\.0\)/)
  t.deepEqual(fleet.started.filter(([, purpose]) => purpose === 'revert'), [], 'no revert sent into a run still going')
  t.true(engine.state.finishedAt! - start < 120_000 + 3_600_000 + 30_000, 'the rollout ends soon after that')
})

test('a node whose answer to the start comes too late is asked once: its run is followed to the end, not counted as "no answer"', async (t) => {
  const {engine, fleet} = await simulate(specs(['slow-start', 'succeed', 'silent']), settings({maxFailures: {count: 1}}))
  t.is(stateOf(engine, 'n00000'), 'succeeded')
  t.is(fleet.nodes.get('n00000')!.starts, 1, 'started once, never twice')
  t.is(stateOf(engine, 'n00002'), 'no answer')
  t.regex(engine.node('n00002')!.message!, /did not answer the survey, nor a status request at its turn: not started/)
  t.is(engine.state.stopped, null)
})

test('a node that stops answering while its run goes on is "no answer" after two silent polls', async (t) => {
  const {engine} = await simulate(specs(['vanish', 'succeed'], 60_000), settings({maxFailures: {count: 1}}))
  t.is(stateOf(engine, 'n00000'), 'no answer')
  t.regex(engine.node('n00000')!.message!, /stopped answering while run n00000-1/)
})

test('--soak: a node whose newest attempt failed after its batch succeeded counts as failed, and stops the rollout', async (t) => {
  const {engine, fleet} = await simulate(specs(['sours', 'succeed', 'succeed']), settings({batch: [{count: 1}], soakMs: 60_000}))
  t.is(stateOf(engine, 'n00000'), 'failed')
  t.regex(engine.node('n00000')!.message!, /after the soak: run n00000-1-timer failed/)
  t.is(stateOf(engine, 'n00001'), 'not started')
  t.deepEqual(fleet.started.filter(([, purpose]) => purpose === 'revert'), [['n00000', 'revert', BEFORE]])
})

test('--soak waits between batches: the second batch starts no earlier than the soak after the first settled', async (t) => {
  const {engine, events} = await simulate(specs(['succeed', 'succeed']), settings({batch: [{count: 1}], soakMs: 300_000}))
  const dispatches = events.filter((event) => event.kind === 'dispatched')
  t.is(dispatches.length, 2)
  t.true(dispatches[1].at - engine.node('n00000')!.finishedAt! >= 300_000)
})

test('--only-outdated: a node whose newest attempt succeeded on REF is "up to date" and not run', async (t) => {
  const nodes = specs(['succeed', 'succeed'])
  nodes[0].before = REF
  const clock = new VirtualClock()
  const fleet = new SimulatedFleet(nodes, clock)
  // n00000 already ran REF: its newest attempt is a succeeded run of it.
  await fleet.start(['n00000'], settings())
  clock.time += 10_000
  fleet.started.length = 0
  const {engine} = await simulate(nodes, settings({onlyOutdated: true}), {fleet})
  t.is(stateOf(engine, 'n00000'), 'up to date')
  t.is(stateOf(engine, 'n00001'), 'succeeded')
  t.deepEqual(fleet.started, [['n00001', 'apply', REF]])
})

test('--revert all: when the rollout stops, the nodes it moved go back too; a node with no release before is "no target"', async (t) => {
  const nodes = specs(['succeed', 'succeed', 'fail', 'succeed'])
  nodes[1].before = null
  const {engine, fleet} = await simulate(nodes, settings({batch: [{count: 3}], revert: 'all', save: true}))
  t.is(stateOf(engine, 'n00003'), 'not started')
  t.is(engine.node('n00000')!.revert?.state, 'succeeded')
  t.true(engine.node('n00000')!.revert?.save, 'a node whose pointer moved (--save, succeeded) has it put back')
  t.is(engine.node('n00001')!.revert?.state, 'no target')
  t.is(engine.node('n00002')!.revert?.state, 'succeeded')
  t.false(engine.node('n00002')!.revert?.save, 'a failed run never moved the pointer')
  t.deepEqual(fleet.started.filter(([, purpose]) => purpose === 'revert').map(([name]) => name), ['n00000', 'n00002'])
})

test('no revert loop: a node that was on REF before and failed on it again is not "reverted" to REF', async (t) => {
  const nodes = specs(['fail'])
  nodes[0].before = REF
  const {engine, fleet} = await simulate(nodes, settings())
  t.is(engine.node('n00000')!.revert?.state, 'not needed')
  t.deepEqual(fleet.started.filter(([, purpose]) => purpose === 'revert'), [])
})

test('a --noop rollout reverts nothing', async (t) => {
  const {engine, fleet} = await simulate(specs(['fail']), settings({noop: true}))
  t.is(stateOf(engine, 'n00000'), 'failed')
  t.is(engine.node('n00000')!.revert, null)
  t.is(fleet.started.length, 1)
})

test('--window 3 keeps three nodes running, starting the next as soon as one finishes', async (t) => {
  const nodes = specs(Array.from({length: 10}, () => 'succeed' as Behaviour))
  nodes.forEach((node, i) => (node.runMs = 1000 * (1 + (i % 4))))
  const {engine, violations, events} = await simulate(nodes, settings({window: 3}))
  t.deepEqual(violations, [])
  t.true(engine.state.nodes.every((node) => node.state === 'succeeded'))
  t.true(events.filter((event) => event.kind === 'dispatched').length > 3, 'started in several waves')
})

test('a reply from another node, for another run, or twice, changes nothing', (t) => {
  const engine = new RolloutEngine(settings(), ['a', 'b'])
  engine.handle({kind: 'surveyed', at: 1, answers: {a: {pointer: BEFORE, applied: BEFORE, newest: null}}})
  engine.handle({kind: 'dispatched', at: 2, purpose: 'apply', nodes: ['a']})
  engine.handle({kind: 'started', at: 3, purpose: 'apply', nodes: ['a'], answers: {a: {run: {runId: 'r1', state: 'running', release: REF}}, b: {run: {runId: 'r9', state: 'running', release: REF}}}})
  t.is(engine.node('b')!.state, 'pending', 'b was not asked in that call: its answer is not taken')
  t.is(engine.handle({kind: 'polled', at: 4, nodes: ['a'], answers: {a: {runId: 'r-other', state: 'succeeded', release: REF}}}), null)
  t.is(engine.node('a')!.state, 'running')
  engine.handle({kind: 'polled', at: 5, nodes: ['a'], answers: {a: {runId: 'r1', state: 'failed', release: REF, message: 'Error: boom'}}})
  t.is(engine.node('a')!.state, 'failed')
  t.is(engine.handle({kind: 'polled', at: 6, nodes: ['a'], answers: {a: {runId: 'r1', state: 'succeeded', release: REF}}}), null, 'a second answer for a final run changes nothing')
  t.is(engine.node('a')!.state, 'failed')
})

// Issue 26, hostile replies: a node cannot finish its run, or another node's, with words alone.
test('a node that answers only with another node\'s run id is never taken as finished: it ends at its deadline, counted', (t) => {
  const engine = new RolloutEngine(settings({deadlineMs: 60_000}), ['a', 'b'])
  engine.handle({kind: 'surveyed', at: 1, answers: {a: {pointer: BEFORE, applied: BEFORE, newest: null}, b: {pointer: BEFORE, applied: BEFORE, newest: null}}})
  engine.handle({kind: 'dispatched', at: 2, purpose: 'apply', nodes: ['a', 'b']})
  engine.handle({kind: 'started', at: 3, purpose: 'apply', nodes: ['a', 'b'], answers: {a: {run: {runId: 'ra', state: 'running', release: REF}}, b: {run: {runId: 'rb', state: 'running', release: REF}}}})
  for (let at = 10; at < 60_000; at += 10_000) {
    // a keeps quoting b's run, which succeeded; b answers for itself.
    engine.handle({kind: 'polled', at, nodes: ['a', 'b'], answers: {a: {runId: 'rb', state: 'succeeded', release: REF}, b: {runId: 'rb', state: 'running', release: REF}}})
    t.is(engine.node('a')!.state, 'running', `at ${at}: a's own run is still unknown`)
  }

  engine.handle({kind: 'tick', at: 60_002})
  t.is(engine.node('a')!.state, 'deadline')
  t.regex(engine.node('a')!.message!, /no final run within --deadline 60s \(run ra still running\)/)
})

test('a reply for a run that never started (a node not dispatched, or pending) changes nothing (a node answering twice: the transport believes its first reply, transports/mco.test.ts)', (t) => {
  const engine = new RolloutEngine(settings(), ['a', 'b'])
  engine.handle({kind: 'surveyed', at: 1, answers: {a: {pointer: BEFORE, applied: BEFORE, newest: null}, b: {pointer: BEFORE, applied: BEFORE, newest: null}}})
  const before = JSON.stringify(engine.state)
  // b was never dispatched: its "run" (succeeded, failed) is not believed.
  t.is(engine.handle({kind: 'polled', at: 2, nodes: ['b'], answers: {b: {runId: 'forged', state: 'failed', release: REF}}}), null)
  t.is(engine.handle({kind: 'started', at: 3, purpose: 'apply', nodes: ['b'], answers: {b: {run: {runId: 'forged', state: 'succeeded', release: REF}}}}), null)
  t.is(JSON.stringify(engine.state), before, 'the state did not move')
  t.is(engine.node('b')!.state, 'pending')
  // A revert reply for a node that has no revert running.
  t.is(engine.handle({kind: 'started', at: 4, purpose: 'revert', nodes: ['a'], answers: {a: {run: {runId: 'rv', state: 'running', release: BEFORE}}}}), null)
  t.is(engine.node('a')!.revert ?? null, null)
})

// Issue 32, item 1: a run that misses --deadline and succeeds late.
test('a node whose run misses --deadline and succeeds late is reverted only once that run ended: it ends on, and (with --save) pointed at, the release it had', async (t) => {
  const nodes = specs(['succeed', 'succeed'], 200_000)
  nodes[0].runMs = 5000
  nodes[1].revertMs = 5000
  const {engine, fleet, events} = await simulate(nodes, settings({deadlineMs: 120_000, save: true}))
  const late = engine.node('n00001')!
  t.is(late.state, 'deadline', 'the rollout judged it failed')
  t.regex(late.message!, /no final run within --deadline 120s \(run n00001-1 still running\); the run ended succeeded after it: the revert waited for it/)
  t.like(late.revert, {state: 'succeeded', release: BEFORE, save: true})
  t.regex(late.revert!.message!, /^waited for its late run n00001-1 to end \(succeeded on app\/tags\/1\.1\.0\), then reverted$/)
  // The revert went after the late run ended, never into it (which the node would have answered busy).
  const sim = fleet.nodes.get('n00001')!
  t.deepEqual(sim.runs.map((run) => [run.purpose, run.report.state]), [['apply', 'succeeded'], ['revert', 'succeeded']])
  const revertSent = events.find((event) => event.kind === 'dispatched' && event.purpose === 'revert')!
  t.true(revertSent.at >= Date.parse(sim.runs[0].report.startedAt!) + 200_000)
  t.is(sim.pointer, BEFORE, 'pointed at the release it had, not at the one judged failed')
  t.is((await fleet.survey(['n00001'])).n00001.applied, BEFORE, 'and on it')
})

test('a revert answered busy by the node\'s own late run waits for that run, then reverts (a record from before the wait was planned)', (t) => {
  const engine = new RolloutEngine(settings({deadlineMs: 60_000, save: true}), ['a'])
  engine.handle({kind: 'surveyed', at: 1, answers: {a: {pointer: BEFORE, applied: BEFORE, newest: null}}})
  engine.handle({kind: 'dispatched', at: 2, purpose: 'apply', nodes: ['a']})
  engine.handle({kind: 'started', at: 3, purpose: 'apply', nodes: ['a'], answers: {a: {run: {runId: 'r1', state: 'running', release: REF}}}})
  engine.handle({kind: 'tick', at: 60_002})
  t.is(engine.node('a')!.state, 'deadline')
  t.is(engine.node('a')!.revert?.state, 'waiting')
  t.deepEqual(engine.next(60_003), [{kind: 'poll', runs: [{node: 'a', runId: 'r1'}], waitMs: 10_000}], 'the late run is polled, no revert is sent')
  engine.handle({kind: 'polled', at: 70_000, nodes: ['a'], answers: {a: {runId: 'r1', state: 'succeeded', release: REF}}})
  t.deepEqual(engine.next(70_001), [{kind: 'revert', nodes: [{node: 'a', release: BEFORE, save: true}]}])
  // Busy all the same (a timer run began meanwhile): tried again later, not given up.
  engine.handle({kind: 'dispatched', at: 70_002, purpose: 'revert', nodes: ['a']})
  engine.handle({kind: 'started', at: 70_003, purpose: 'revert', nodes: ['a'], answers: {a: {exitCode: 73, message: 'another run is in progress', busy: true}}})
  t.is(engine.node('a')!.revert?.state, 'busy')
  t.false(engine.done)
  t.deepEqual(engine.next(70_004), [{kind: 'wait', until: 70_003 + 30_000}])
  t.deepEqual(engine.next(100_003), [{kind: 'revert', nodes: [{node: 'a', release: BEFORE, save: true}]}])
  engine.handle({kind: 'dispatched', at: 100_004, purpose: 'revert', nodes: ['a']})
  engine.handle({kind: 'started', at: 100_005, purpose: 'revert', nodes: ['a'], answers: {a: {run: {runId: 'r2', state: 'running', release: BEFORE}}}})
  engine.handle({kind: 'polled', at: 105_000, nodes: ['a'], answers: {a: {runId: 'r2', state: 'succeeded', release: BEFORE}}})
  t.true(engine.done)
  t.like(engine.node('a')!.revert, {state: 'succeeded', release: BEFORE})
  t.regex(engine.node('a')!.revert!.message!, /waited for its late run r1 to end \(succeeded/)
})

// Issue 32, item 7: a node the survey found silent.
test('a node the survey found silent is never sent a start: its batch\'s live nodes start without it, it is asked once briefly, then "no answer", counted', async (t) => {
  const {engine, fleet} = await simulate(specs(['succeed', 'silent', 'succeed', 'succeed']), settings({batch: [{count: 2}], maxFailures: {count: 1}}))
  t.deepEqual(fleet.addressed, [['n00000'], ['n00002', 'n00003']], 'no start call addressed n00001')
  t.deepEqual(fleet.probed, [['n00001']])
  t.is(stateOf(engine, 'n00001'), 'no answer')
  t.regex(engine.node('n00001')!.message!, /did not answer the survey, nor a status request at its turn: not started/)
  t.is(engine.failures(), 1)
  t.is(engine.state.stopped, null)
  for (const name of ['n00000', 'n00002', 'n00003']) t.is(stateOf(engine, name), 'succeeded', name)
})

test('a node silent at the survey that answers at its turn is started like the others', (t) => {
  const engine = new RolloutEngine(settings(), ['a', 'b'])
  engine.handle({kind: 'surveyed', at: 1, answers: {a: {pointer: BEFORE, applied: BEFORE, newest: null}}})
  t.deepEqual(engine.next(2), [{kind: 'start', nodes: ['a']}, {kind: 'probe', nodes: ['b']}])
  engine.handle({kind: 'dispatched', at: 2, purpose: 'apply', nodes: ['a']})
  engine.handle({kind: 'started', at: 3, purpose: 'apply', nodes: ['a'], answers: {a: {run: {runId: 'r1', state: 'running', release: REF}}}})
  t.deepEqual(engine.next(4)[0], {kind: 'probe', nodes: ['b']})
  engine.handle({kind: 'probed', at: 5, nodes: ['b'], answers: {b: {pointer: BEFORE, applied: BEFORE, newest: null}}})
  t.like(engine.node('b'), {state: 'pending', surveyed: true, before: BEFORE})
  t.deepEqual(engine.next(6)[0], {kind: 'start', nodes: ['b']})
})

// Issue 32, item 2: the rollouts that each reported success over a fleet left mixed.
test('a node another run moved off REF before the rollout ended is "overtaken": not counted, not reverted, and the rollout does not exit 0', async (t) => {
  const {engine, fleet} = await simulate(specs(['succeed', 'overtaken', 'succeed']), settings({revert: 'all'}))
  t.is(stateOf(engine, 'n00001'), 'overtaken')
  t.regex(engine.node('n00001')!.message!, /^not on app\/tags\/1\.1\.0 when the rollout ended: app\/tags\/0\.8\.0 was applied since \(its newest run n00001-1-other: succeeded app\/tags\/0\.8\.0\)$/)
  t.is(engine.failures(), 0)
  t.is(engine.state.stopped, null)
  t.deepEqual(fleet.started.filter(([, purpose]) => purpose === 'revert'), [])
  for (const name of ['n00000', 'n00002']) t.is(stateOf(engine, name), 'succeeded', name)
  t.is(rolloutExitCode(engine), 1)
  // Every node on REF: 0, after the same last question.
  const clean = await simulate(specs(['succeed', 'succeed']), settings())
  t.is(rolloutExitCode(clean.engine), 0)
  t.is(clean.engine.state.verify, 'done')
})

// ---- properties ----

/** Assertions that throw, so that fast-check sees a failure, shrinks it and prints the counterexample. */
const check = {
  is: (actual: unknown, expected: unknown, message?: string) => assert.strictEqual(actual, expected, message),
  true: (value: boolean, message?: string) => assert.ok(value, message),
  deepEqual: (actual: unknown, expected: unknown, message?: string) => assert.deepStrictEqual(actual, expected, message),
}

const BEHAVIOURS: Behaviour[] = ['succeed', 'succeed', 'succeed', 'succeed', 'fail', 'refuse', 'busy-once', 'busy-always', 'silent', 'hang', 'vanish', 'sours', 'slow-start', 'overtaken']

const fleetArbitrary = (maxNodes: number): fc.Arbitrary<FleetInput> =>
  fc.record({
    behaviours: fc.array(fc.constantFrom(...BEHAVIOURS), {minLength: 1, maxLength: maxNodes}),
    runMs: fc.array(fc.integer({min: 500, max: 90_000}), {minLength: 1, maxLength: 8}),
    noBefore: fc.array(fc.boolean(), {minLength: 1, maxLength: 5}),
    canary: fc.integer({min: 0, max: 3}),
    batch: fc.constantFrom('1', '2', '5', '1,5,25%,100%', '10%', '100%', '3,50%'),
    window: fc.option(fc.integer({min: 1, max: 8}), {nil: null}),
    maxFailures: fc.constantFrom('0', '1', '3', '5%', '50%', '100%'),
    soakMs: fc.constantFrom(0, 0, 30_000),
    revert: fc.constantFrom<RolloutSettings['revert']>('failed', 'all', 'none'),
    save: fc.boolean(),
  })

interface FleetInput {
  behaviours: Behaviour[]
  runMs: number[]
  noBefore: boolean[]
  canary: number
  batch: string
  window: number | null
  maxFailures: string
  soakMs: number
  revert: RolloutSettings['revert']
  save: boolean
}

function build(input: FleetInput): {specList: SimNodeSpec[]; s: RolloutSettings} {
  const specList = input.behaviours.map((behaviour, i) => ({
    name: `n${String(i).padStart(5, '0')}`,
    behaviour,
    runMs: input.runMs[i % input.runMs.length],
    before: input.noBefore[i % input.noBefore.length] ? null : BEFORE,
  }))
  const s = settings({
    canary: input.canary,
    batch: parseBatch(input.batch),
    window: input.window,
    maxFailures: parseStep(input.maxFailures, '--max-failures', true),
    soakMs: input.soakMs,
    revert: input.revert,
    save: input.save,
    deadlineMs: 120_000,
  })
  return {specList, s}
}

/** The nodes that must have been put back, from their final states alone. */
function expectedReverts(engine: RolloutEngine): string[] {
  const {settings: s, state} = engine
  if (s.revert === 'none' || s.noop) return []
  return state.nodes
    .filter((node) => node.state === 'failed' || node.state === 'deadline' || (s.revert === 'all' && state.stopped !== null && node.state === 'succeeded'))
    .filter((node) => node.before !== null && node.before !== node.release)
    .map((node) => node.node)
}

/** Nodes whose own run never ends ('hang'): their revert waits for it and is never sent. */
const neverEnds = (fleet: SimulatedFleet, name: string): boolean => fleet.nodes.get(name)!.behaviour === 'hang'

test('property: within the batch or window, nothing started after the budget is spent, the right nodes reverted, every node final once', async (t) => {
  await fc.assert(
    fc.asyncProperty(fleetArbitrary(60), async (input) => {
      const {specList, s} = build(input)
      const {engine, fleet, violations} = await simulate(specList, s)
      check.deepEqual(violations, [])
      check.true(engine.done)
      for (const node of engine.state.nodes) check.true(FINAL_STATES.includes(node.state), `${node.node} ended ${node.state}`)
      const counted = engine.state.nodes.filter((node) => ['failed', 'refused', 'deadline', 'no answer'].includes(node.state)).length
      check.is(engine.state.stopped !== null, counted > engine.state.allowedFailures)
      // Reverted: exactly the nodes the rules name, each once, to the release it had before.
      const reverted = fleet.started.filter(([, purpose]) => purpose === 'revert')
      const reachable = expectedReverts(engine).filter((name) => !['silent', 'vanish'].includes(fleet.nodes.get(name)!.behaviour) && !neverEnds(fleet, name))
      check.deepEqual(reverted.map(([name]) => name).sort(), reachable.sort())
      for (const [name, , release] of reverted) check.is(release, engine.node(name)!.before)
      // A revert is never sent into the node's own run still going: every one sent succeeded, and none went busy.
      for (const name of reachable) check.is(engine.node(name)!.revert?.state, 'succeeded', `${name}'s revert`)
      for (const name of expectedReverts(engine).filter((name) => neverEnds(fleet, name))) check.is(engine.node(name)!.revert?.state, 'deadline', `${name}'s revert waited for its run`)
      // No node ran the release twice (a busy node was refused before it ran).
      const applies = fleet.started.filter(([, purpose]) => purpose === 'apply').map(([name]) => name)
      check.is(new Set(applies).size, applies.length)
    }),
    {numRuns: 150},
  )
  t.pass()
})

/**
 * Cases that once failed, kept (fast-check runs them first, then its random runs).
 * Issue 32: CI seed 2119834354: stopped between recording a busy node's retry and sending
 * it, the resumed rollout (whose question found the retry had not started) put it back as
 * pending rather than busy, and retried the busy nodes in another order (n00006 before n00004).
 */
const RESUME_CASES: Array<[FleetInput, number]> = [
  [{behaviours: ['succeed', 'succeed', 'succeed', 'succeed', 'busy-once', 'busy-always', 'busy-once', 'succeed'], runMs: [30_601, 31_301], noBefore: [false], canary: 0, batch: '1', window: 5, maxFailures: '0', soakMs: 0, revert: 'failed', save: false}, 394],
]

test('property: a rollout stopped after any event and resumed from its record ends exactly as one never stopped', async (t) => {
  await fc.assert(
    fc.asyncProperty(fleetArbitrary(25), fc.integer({min: 1, max: 400}), async (input, cut) => {
      const {specList, s} = build(input)
      const whole = await simulate(specList, s)
      const stopAfter = 1 + (cut % whole.events.length)
      const first = await simulate(specList, s, {stopAfter})
      // The record: replaying its events gives exactly the state the stopped rollout had.
      const resumed = new RolloutEngine(s, specList.map((spec) => spec.name))
      replayEvents(resumed, first.events)
      check.deepEqual(resumed.state, first.engine.state)
      // Only the resumed rollout's own question (adopt) costs no time; any later one does.
      first.fleet.nextSurveyFree = resumed.next(first.fleet.clock.now())[0].kind === 'adopt'
      const rest = await simulate(specList, s, {fleet: first.fleet, engine: resumed, events: [...first.events]})
      check.deepEqual(finalStates(rest.engine), finalStates(whole.engine))
      check.deepEqual(first.fleet.started, whole.fleet.started, 'the same runs, none twice')
    }),
    {numRuns: 120, examples: RESUME_CASES},
  )
  t.pass()
})

test('property: killed after a start reached the nodes but before their answers were recorded, a resume asks them and runs no node twice', async (t) => {
  await fc.assert(
    fc.asyncProperty(fleetArbitrary(25), fc.integer({min: 1, max: 6}), async (input, killAt) => {
      const {specList, s} = build(input)
      const clock = new VirtualClock()
      const fleet = new SimulatedFleet(specList, clock)
      fleet.killAfterStart = killAt
      const events: RolloutEvent[] = []
      const engine = new RolloutEngine(s, specList.map((spec) => spec.name))
      try {
        await simulate(specList, s, {fleet, engine, events})
      } catch (error) {
        if (!(error instanceof Killed)) throw error
        const resumed = new RolloutEngine(s, specList.map((spec) => spec.name))
        replayEvents(resumed, events)
        fleet.nextSurveyFree = true
        await simulate(specList, s, {fleet, engine: resumed, events})
        for (const node of resumed.state.nodes) check.true(FINAL_STATES.includes(node.state), `${node.node} ended ${node.state}`)
      }

      const applies = fleet.started.filter(([, purpose]) => purpose === 'apply').map(([name]) => name)
      check.is(new Set(applies).size, applies.length, `ran twice: ${applies.join(',')}`)
    }),
    {numRuns: 100},
  )
  t.pass()
})

test('property: 10,000 nodes with random outcomes, batches or a window: every rule holds', async (t) => {
  t.timeout(120_000)
  await fc.assert(
    fc.asyncProperty(fleetArbitrary(1).map((input) => ({...input, behaviours: Array.from({length: 10_000}, (_, i) => BEHAVIOURS[(i * 7919 + input.runMs[0]) % 40 === 0 ? 4 + (i % 8) : 0])})), async (input) => {
      const {specList, s} = build({...input, maxFailures: '5%', window: input.window === null ? null : input.window * 50})
      const {engine, violations} = await simulate(specList, s)
      check.deepEqual(violations, [])
      check.true(engine.state.nodes.every((node) => FINAL_STATES.includes(node.state)))
    }),
    {numRuns: 3},
  )
  t.pass()
})
