import type {Clock, RolloutTransport} from '../../src/lib/rollout/drive.js'
import type {NodeReport, RunReport, StartAnswer} from '../../src/lib/rollout/engine.js'
import type {RolloutSettings} from '../../src/lib/rollout/settings.js'

/*
 * A fleet that exists only in memory, on a clock that moves only when the fleet says a
 * call took time: the rollout engine's property tests and benchmark drive 10,000 nodes
 * through it in well under a second. Each node behaves as told, the same way every time,
 * whatever order it is asked in, so that a rollout interrupted and resumed can be compared
 * with one that never was.
 */

/** `slow-start`: its run starts, but its answer to the start comes too late (it answers everything else). */
/** `overtaken`: after its run succeeded, another run applies another release on it (an operator, a timer). */
export type Behaviour = 'succeed' | 'fail' | 'refuse' | 'busy-once' | 'busy-always' | 'silent' | 'hang' | 'vanish' | 'sours' | 'slow-start' | 'overtaken'

export interface SimNodeSpec {
  name: string
  behaviour: Behaviour
  /** How long its runs take. */
  runMs: number
  /** How long its reverts take, when not runMs. */
  revertMs?: number
  /** The release it had applied before (its newest succeeded run), or null. */
  before: string | null
}

interface SimRun {
  report: RunReport
  endsAt: number
  outcome: 'succeeded' | 'failed'
  purpose: 'apply' | 'revert'
  /** --save: the node's pointer moves to the run's release once it succeeds. */
  save: boolean
}

interface SimNode extends SimNodeSpec {
  runs: SimRun[]
  starts: number
  pointer: string | null
}

export class VirtualClock implements Clock {
  constructor(public time = Date.parse('2026-11-25T12:00:00Z')) {}

  now(): number {
    return this.time
  }

  async sleep(ms: number): Promise<void> {
    this.time += Math.max(0, ms)
  }
}

/** Thrown by the fleet's `killAfter` hook: the rollout's process "dies" there. */
export class Killed extends Error {}

export class SimulatedFleet implements RolloutTransport {
  readonly nodes = new Map<string, SimNode>()
  /** Calls the fleet answered, counted; a hook may kill the caller after the n-th start's effect. */
  calls = 0
  killAfterStart: number | null = null
  private startCalls = 0
  /** Every run started, in order: [node, purpose, release]. */
  readonly started: Array<[string, 'apply' | 'revert', string | null]> = []

  constructor(
    specs: SimNodeSpec[],
    readonly clock: VirtualClock,
    readonly latencyMs = {survey: 200, start: 300, reply: 10_000},
  ) {
    for (const spec of specs) this.nodes.set(spec.name, {...spec, runs: [], starts: 0, pointer: spec.before ?? 'app/tags/0.9.0'})
  }

  /** Whether the node answers at all now: a silent one never, one that vanishes once its run has started. */
  private answers(name: string): boolean {
    const node = this.nodes.get(name)
    return node !== undefined && node.behaviour !== 'silent' && !(node.behaviour === 'vanish' && node.runs.length > 0)
  }

  private settle(run: SimRun, node: SimNode): void {
    if (run.report.state === 'running' && this.clock.time >= run.endsAt) {
      run.report = {...run.report, state: run.outcome, durationMs: run.endsAt - Date.parse(run.report.startedAt!), message: run.outcome === 'failed' ? 'Error: Evaluation Error: Unknown variable: $oops' : null}
      if (run.save && run.outcome === 'succeeded') node.pointer = run.report.release
    }
  }

  private report(node: SimNode): NodeReport {
    for (const run of node.runs) this.settle(run, node)
    const newest = node.runs.at(-1)?.report ?? null
    const applied = [...node.runs].reverse().find((run) => run.report.state === 'succeeded')?.report.release ?? node.before
    // A node that sours: after its run succeeded, a later (timer) run fails.
    if (node.behaviour === 'sours' && newest?.state === 'succeeded') {
      return {pointer: node.pointer, applied, newest: {...newest, runId: `${newest.runId}-timer`, state: 'failed', message: 'Error: the timer run failed'}}
    }

    if (node.behaviour === 'overtaken' && newest?.state === 'succeeded' && node.runs.at(-1)?.purpose === 'apply') {
      return {pointer: node.pointer, applied: 'app/tags/0.8.0', newest: {...newest, runId: `${newest.runId}-other`, release: 'app/tags/0.8.0'}}
    }

    return {pointer: node.pointer, applied, newest}
  }

  /** The next survey costs no time (a resumed rollout's question must not move the timeline). */
  nextSurveyFree = false

  async survey(names: string[]): Promise<Record<string, NodeReport>> {
    this.calls++
    if (!this.nextSurveyFree) this.clock.time += this.latencyMs.survey
    this.nextSurveyFree = false
    return this.reports(names)
  }

  private reports(names: string[]): Record<string, NodeReport> {
    const answers: Record<string, NodeReport> = {}
    for (const name of names) {
      const node = this.nodes.get(name)
      if (node && this.answers(name)) answers[name] = this.report(node)
    }

    return answers
  }

  /** Nodes each probe asked, in order. */
  readonly probed: string[][] = []
  /** Nodes each start call addressed, in order (a node may be addressed and not answer). */
  readonly addressed: string[][] = []

  async probe(names: string[]): Promise<Record<string, NodeReport>> {
    this.calls++
    this.probed.push([...names])
    const answers = this.reports(names)
    // A silent node costs the probe's whole (short) timeout.
    this.clock.time += Object.keys(answers).length < names.length ? 3000 : this.latencyMs.survey
    return answers
  }

  private begin(node: SimNode, release: string | null, purpose: 'apply' | 'revert', save: boolean): StartAnswer {
    node.starts++
    if (purpose === 'apply' && (node.behaviour === 'busy-always' || (node.behaviour === 'busy-once' && node.starts === 1))) {
      return {exitCode: 73, message: 'another run is in progress (run timer-1)', busy: true}
    }

    if (purpose === 'apply' && node.behaviour === 'refuse') return {exitCode: 73, message: 'puppet is disabled: maintenance', busy: false}
    // One run at a time on a node, as the agent's lock has it: a revert sent while the node's own run goes on is busy.
    for (const run of node.runs) this.settle(run, node)
    const going = node.runs.find((run) => run.report.state === 'running')
    if (going) return {exitCode: 73, message: `another run is in progress (run ${going.report.runId})`, busy: true}
    const runId = `${node.name}-${node.runs.length + 1}`
    const endsAt = purpose === 'apply' && node.behaviour === 'hang' ? Number.POSITIVE_INFINITY : this.clock.time + (purpose === 'revert' ? (node.revertMs ?? node.runMs) : node.runMs)
    const report: RunReport = {runId, state: 'running', release, ref: release, noop: false, startedAt: new Date(this.clock.time).toISOString()}
    node.runs.push({report, endsAt, outcome: purpose === 'apply' && node.behaviour === 'fail' ? 'failed' : 'succeeded', purpose, save})
    this.started.push([node.name, purpose, release])
    return {run: report}
  }

  async start(names: string[], settings: RolloutSettings): Promise<Record<string, StartAnswer>> {
    this.calls++
    this.addressed.push([...names])
    const answers: Record<string, StartAnswer> = {}
    for (const name of names) {
      const node = this.nodes.get(name)
      if (!node || !this.answers(name)) continue
      const answer = this.begin(node, settings.ref ?? node.pointer, 'apply', settings.save)
      if (node.behaviour !== 'slow-start') answers[name] = answer
    }

    this.clock.time += Object.keys(answers).length === names.length ? this.latencyMs.start : this.latencyMs.reply
    this.startCalls++
    if (this.killAfterStart !== null && this.startCalls >= this.killAfterStart) {
      this.killAfterStart = null
      throw new Killed('killed after a start reached the nodes')
    }

    return answers
  }

  async revert(entries: Array<{node: string; release: string; save: boolean}>): Promise<Record<string, StartAnswer>> {
    this.calls++
    const answers: Record<string, StartAnswer> = {}
    for (const {node: name, release, save} of entries) {
      const node = this.nodes.get(name)
      if (!node || !this.answers(name)) continue
      answers[name] = this.begin(node, release, 'revert', save)
    }

    this.clock.time += Object.keys(answers).length === entries.length ? this.latencyMs.start : this.latencyMs.reply
    return answers
  }

  async poll(runs: Array<{node: string; runId: string}>, waitMs: number): Promise<Record<string, RunReport>> {
    this.calls++
    const now = this.clock.time
    let until = now
    const answering: Array<[string, SimRun]> = []
    let silent = false
    for (const {node: name, runId} of runs) {
      const node = this.nodes.get(name)
      const run = node?.runs.find((entry) => entry.report.runId === runId)
      if (!node || !run || !this.answers(name)) {
        silent = true
        continue
      }

      answering.push([name, run])
      until = Math.max(until, Math.min(run.endsAt, now + waitMs))
    }

    this.clock.time = silent ? Math.max(until, now + waitMs + this.latencyMs.reply) : Math.max(until, now + 50)
    const answers: Record<string, RunReport> = {}
    for (const [name, run] of answering) {
      this.settle(run, this.nodes.get(name)!)
      answers[name] = run.report
    }

    return answers
  }
}
