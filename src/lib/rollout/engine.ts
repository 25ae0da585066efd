import {DEFAULT_DEADLINE_MS, type RolloutSettings, cutBatches, formatStep, stepSize} from './settings.js'
import type {NodeReport, NodeState, RevertEntry, RolloutAction, RolloutEvent, RolloutNode, RolloutState, RunReport} from './types.js'

export type {NodeState, RevertState, RunReport, NodeReport, StartAnswer, RolloutEvent, RolloutAction, RevertEntry, RolloutNode, Phase, RolloutState} from './types.js'

/*
 * The rollout engine: a state machine with no I/O of its own, in the spirit of Nomad's
 * deployment watcher. The fleet's answers come in as events (each with the time it was
 * seen), the engine says what to do next as actions, and a driver (drive.ts) carries
 * them out over a transport. Every event that changed something is recorded, so that
 * replaying a record's events into a fresh engine gives exactly the state it had: that is
 * what makes `rollout --resume` exact.
 *
 * A node's life: pending -> starting (the start was sent) -> running (it answered with a
 * run id) -> succeeded | failed | refused | deadline | no answer; busy (73, another run in
 * progress) is tried once more later, then stays busy; up to date (--only-outdated) and not
 * started (the rollout stopped before its turn) are decided without running anything.
 */

/** States that count against the failure budget. */
export const COUNTED_STATES: readonly NodeState[] = ['failed', 'refused', 'deadline', 'no answer']
export const FINAL_STATES: readonly NodeState[] = ['succeeded', 'failed', 'refused', 'deadline', 'no answer', 'up to date', 'not started', 'busy', 'overtaken']
/** Run record states that are a success, and those that are final. */
const RUN_OK = new Set(['succeeded', 'skipped'])
const RUN_FINAL = new Set(['succeeded', 'skipped', 'failed', 'error', 'interrupted', 'refused', 'busy'])
/** A node two polls in a row silent while its run is going has stopped answering. */
const SILENT_POLLS = 2
/** How far a node's clock may be behind ours when a resumed rollout recognises a run it started. */
const CLOCK_SKEW_MS = 120_000
/** The longest a poll waits for runs to end before the engine looks again. */
export const POLL_WAIT_MS = 10_000

/** Final: a busy node only once it will not be tried again. */
const isFinal = (node: RolloutNode): boolean => FINAL_STATES.includes(node.state) && !(node.state === 'busy' && node.retryAt !== null)
/** A revert with something still to do: to send, to hear about, a late run to wait for, a busy answer to try again. */
const revertActive = (revert: RevertEntry | null): boolean =>
  revert !== null && (['pending', 'starting', 'running', 'waiting'].includes(revert.state) || (revert.state === 'busy' && revert.retryAt != null))

/**
 * One rollout's decisions. `handle` takes an event and returns whether it changed
 * anything (an event that changed nothing need not be recorded); `next` says what to do
 * now and never changes the state.
 */
export class RolloutEngine {
  readonly state: RolloutState
  private readonly index = new Map<string, number>()
  /*
   * Derived from the state, never recorded: how many nodes are in each state, the nodes
   * with something going on (the only ones a decision looks at), each group's nodes not
   * yet final, and where each group's next pending node is. They keep every decision in
   * proportion to the nodes in flight, not to the fleet: a 10,000-node rollout is decided
   * in well under a second.
   */
  private readonly counts = new Map<string, number>()
  private readonly active = new Set<number>()
  private readonly indexed: Array<{state: string; revert: string; active: boolean; unfinished: boolean}> = []
  private unfinished: number[] = []
  /** Grows whenever a node's state or revert state changes: part of the signature. */
  private moves = 0
  private cursor: number[] = []

  constructor(
    readonly settings: RolloutSettings,
    expected: string[],
  ) {
    // In the order given: the fleet's, in natural name order (expectedFleet), or a record's as it was recorded.
    const names = [...new Set(expected)]
    this.state = {
      phase: 'survey',
      nodes: names.map((node) => ({
        node,
        state: 'pending',
        group: null,
        surveyed: false,
        before: null,
        pointerBefore: null,
        wanted: settings.ref,
        runId: null,
        release: null,
        dispatchedAt: null,
        finishedAt: null,
        durationMs: null,
        resources: null,
        noop: settings.noop,
        exitCode: null,
        message: null,
        busyTries: 0,
        retryAt: null,
        silent: 0,
        revert: null,
      })),
      groups: [],
      settledAt: [],
      rechecked: [],
      stopped: null,
      allowedFailures: 0,
      startedAt: null,
      finishedAt: null,
    }
    names.forEach((node, i) => this.index.set(node, i))
    this.reindexAll()
  }

  private count(key: string): number {
    return this.counts.get(key) ?? 0
  }

  private bump(key: string, by: number): void {
    this.counts.set(key, this.count(key) + by)
  }

  /** Brings the derived indexes up to date with node i. */
  private reindex(i: number): void {
    const node = this.state.nodes[i]
    const next = {
      state: node.state,
      revert: node.revert?.state ?? '',
      active:
        node.state === 'starting' ||
        node.state === 'running' ||
        (node.state === 'busy' && node.retryAt !== null) ||
        revertActive(node.revert),
      unfinished: node.group !== null && !isFinal(node),
    }
    const old = this.indexed[i]
    if (!old || old.state !== next.state || old.revert !== next.revert) this.moves++
    if (old) {
      this.bump(`s:${old.state}`, -1)
      this.bump(`r:${old.revert}`, -1)
      if (old.unfinished) this.unfinished[node.group!]--
    }

    this.bump(`s:${next.state}`, 1)
    this.bump(`r:${next.revert}`, 1)
    if (next.unfinished) this.unfinished[node.group!]++
    if (next.active) this.active.add(i)
    else this.active.delete(i)
    this.indexed[i] = next
  }

  private reindexAll(): void {
    this.counts.clear()
    this.active.clear()
    this.indexed.length = 0
    this.unfinished = this.state.groups.map(() => 0)
    this.cursor = this.state.groups.map(() => 0)
    for (let i = 0; i < this.state.nodes.length; i++) this.reindex(i)
  }

  /** The nodes with something going on, in name order. */
  private activeNodes(): RolloutNode[] {
    return [...this.active].sort((a, b) => a - b).map((i) => this.state.nodes[i])
  }

  node(name: string): RolloutNode | undefined {
    const i = this.index.get(name)
    return i === undefined ? undefined : this.state.nodes[i]
  }

  get done(): boolean {
    return this.state.phase === 'done'
  }

  failures(): number {
    let count = 0
    for (const state of COUNTED_STATES) count += this.count(`s:${state}`)
    return count
  }

  /** What to do now. Pure: the same state and time always give the same actions. */
  next(now: number): RolloutAction[] {
    const {state} = this
    if (state.phase === 'done') return [{kind: 'done'}]
    if (state.phase === 'survey') return [{kind: 'survey', nodes: state.nodes.map((node) => node.node)}]
    const actions: RolloutAction[] = []
    // Starts whose answer was lost (the process died between sending and recording, or the
    // node did not answer in time): ask the node.
    const active = this.activeNodes()
    const orphans = active.filter((node) => node.state === 'starting' || node.revert?.state === 'starting').map((node) => node.node)
    if (orphans.length > 0) return [{kind: 'adopt', nodes: orphans}]
    if (state.phase === 'rolling' && state.verify === 'due') return [{kind: 'verify', nodes: state.nodes.filter((node) => node.state === 'succeeded').map((node) => node.node)}]

    if (state.phase === 'rolling' && state.stopped === null) {
      const group = this.currentGroup()
      if (group !== null) {
        const settled = state.settledAt[group]
        if (settled === null) {
          const inGroup = active.filter((node) => node.group === group)
          const inFlight = inGroup.filter((node) => node.state === 'running' || node.state === 'starting').length
          const room = this.windowed(group) ? Math.max(0, (this.settings.window ?? 0) - inFlight) : Number.POSITIVE_INFINITY
          // Busy nodes due for their retry first, then pending ones in name order.
          const ready = inGroup.filter((node) => node.state === 'busy' && node.retryAt !== null && node.retryAt <= now).slice(0, room)
          const members = state.groups[group]
          let at = this.cursor[group] ?? 0
          while (at < members.length && state.nodes[members[at]].state !== 'pending') at++
          this.cursor[group] = at
          // A node the survey found silent is not sent a start (which would hold the call,
          // and so its batch's live nodes, for a whole reply timeout): it is asked once more,
          // briefly, after the live ones are started, and without an answer it is "no answer".
          const probe: RolloutNode[] = []
          for (let j = at; j < members.length && ready.length < room; j++) {
            const node = state.nodes[members[j]]
            if (node.state !== 'pending') continue
            if (node.surveyed) ready.push(node)
            else probe.push(node)
          }

          if (ready.length > 0) actions.push({kind: 'start', nodes: ready.map((node) => node.node)})
          if (probe.length > 0) actions.push({kind: 'probe', nodes: probe.map((node) => node.node)})
        } else if (now >= settled + this.settings.soakMs && !state.rechecked[group]) {
          const succeeded = state.groups[group].map((i) => state.nodes[i]).filter((node) => node.state === 'succeeded').map((node) => node.node)
          actions.push({kind: 'recheck', group, nodes: succeeded})
        }
      }
    }

    if (state.phase === 'reverting') {
      const reverts = active.filter((node) => node.revert?.state === 'pending' || (node.revert?.state === 'busy' && node.revert.retryAt != null && node.revert.retryAt <= now))
      if (reverts.length > 0) actions.push({kind: 'revert', nodes: reverts.map((node) => ({node: node.node, release: node.revert!.release!, save: node.revert!.save}))})
    }

    const runs: Array<{node: string; runId: string}> = []
    for (const node of active) {
      if (node.state === 'running' && node.runId) runs.push({node: node.node, runId: node.runId})
      else if (node.revert?.state === 'running' && node.revert.runId) runs.push({node: node.node, runId: node.revert.runId})
      else if (node.revert?.state === 'waiting' && node.revert.waitFor) runs.push({node: node.node, runId: node.revert.waitFor})
    }

    const wake = this.nextWake(now)
    if (runs.length > 0) actions.push({kind: 'poll', runs, waitMs: Math.max(1000, Math.min(POLL_WAIT_MS, (wake ?? Number.POSITIVE_INFINITY) - now))})
    if (actions.length === 0) {
      // Nothing to send: wait for the next moment something is due (a soak's end, a busy node's retry).
      if (wake === null) throw new Error(`rollout engine stalled in phase ${state.phase} (a bug)`)
      actions.push({kind: 'wait', until: wake})
    }

    return actions
  }

  /**
   * Applies one event. Returns the event as it must be recorded (an event that changed
   * nothing need not be, and a poll keeps only the answers that changed something), or
   * null when it changed nothing.
   */
  handle(event: RolloutEvent): RolloutEvent | null {
    const listed = 'nodes' in event ? event.nodes : []
    const touched = new Set<number>()
    for (const name of listed) if (this.index.has(name)) touched.add(this.index.get(name)!)
    const before = this.signature()
    const nodesBefore = listed.map((name) => nodeKey(this.node(name)))
    if (this.state.startedAt === null) this.state.startedAt = event.at
    switch (event.kind) {
      case 'surveyed': {
        this.onSurveyed(event.answers)
        break
      }

      case 'dispatched': {
        this.onDispatched(event)
        break
      }

      case 'started': {
        this.onStarted(event)
        break
      }

      case 'polled': {
        this.onPolled(event)
        break
      }

      case 'rechecked': {
        this.onRechecked(event)
        break
      }

      case 'adopted': {
        this.onAdopted(event)
        break
      }

      case 'probed': {
        this.onProbed(event)
        break
      }

      case 'verified': {
        this.onVerified(event)
        break
      }

      case 'tick': {
        break
      }
    }

    if (event.kind === 'surveyed') this.reindexAll()
    else for (const i of touched) this.reindex(i)
    this.checkDeadlines(event.at)
    this.advance(event.at)
    const changedNodes = listed.filter((name, i) => nodeKey(this.node(name)) !== nodesBefore[i])
    if (changedNodes.length === 0 && this.signature() === before) return null
    if (event.kind !== 'polled') return event
    const answers: Record<string, RunReport> = {}
    for (const name of changedNodes) if (Object.hasOwn(event.answers, name)) answers[name] = event.answers[name]
    return {...event, nodes: changedNodes, answers}
  }

  /** What every event may change besides the nodes it names: phase, groups, stop, and how many nodes are in each state. */
  private signature(): string {
    const {phase, stopped, settledAt, rechecked, finishedAt, verify} = this.state
    return `${phase}|${stopped}|${settledAt.join()}|${rechecked.join()}|${finishedAt}|${this.moves}|${verify}`
  }

  // ---- events ----

  private onSurveyed(answers: Record<string, NodeReport>): void {
    if (this.state.phase !== 'survey') return
    const {settings} = this
    const toRun: number[] = []
    this.state.nodes.forEach((node, i) => {
      const answer = Object.hasOwn(answers, node.node) ? answers[node.node] : undefined
      if (answer) {
        node.surveyed = true
        node.before = answer.applied
        node.pointerBefore = answer.pointer
        node.wanted = settings.ref ?? answer.pointer
      }

      if (settings.onlyOutdated && answer && upToDate(node.wanted, answer)) {
        node.state = 'up to date'
        node.release = node.wanted
        node.runId = answer.newest?.runId ?? null
        node.message = `its last completed run already succeeded on ${node.wanted}`
        return
      }

      toRun.push(i)
    })
    const canaries = toRun.slice(0, settings.canary)
    const rest = toRun.slice(canaries.length)
    const groups = canaries.length > 0 ? [canaries] : []
    if (settings.window !== null) {
      if (rest.length > 0) groups.push(rest)
    } else {
      groups.push(...cutBatches(rest, settings.batch))
    }

    groups.forEach((members, g) => {
      for (const i of members) this.state.nodes[i].group = g
    })
    this.state.groups = groups
    this.state.settledAt = groups.map(() => null)
    this.state.rechecked = groups.map(() => false)
    this.state.allowedFailures = stepSize(settings.maxFailures, toRun.length, 0)
    this.state.phase = 'rolling'
  }

  private onDispatched(event: Extract<RolloutEvent, {kind: 'dispatched'}>): void {
    for (const name of event.nodes) {
      const node = this.node(name)
      if (!node) continue
      if (event.purpose === 'apply' && (node.state === 'pending' || node.state === 'busy')) {
        node.state = 'starting'
        node.dispatchedAt = event.at
        node.retryAt = null
      } else if (event.purpose === 'revert' && (node.revert?.state === 'pending' || (node.revert?.state === 'busy' && node.revert.retryAt != null))) {
        node.revert.state = 'starting'
        node.revert.dispatchedAt = event.at
        if (node.revert.retryAt != null) node.revert.retryAt = null
      }
    }
  }

  private onStarted(event: Extract<RolloutEvent, {kind: 'started'}>): void {
    for (const name of event.nodes) {
      const node = this.node(name)
      if (!node) continue
      const answer = Object.hasOwn(event.answers, name) ? event.answers[name] : undefined
      if (event.purpose === 'apply') {
        if (node.state !== 'starting') continue
        if (!answer) {
          // A node slow to answer (a loaded machine, a slow start) may have started the run
          // all the same: it stays "starting" and is asked once (adopt) before it counts.
          node.missed = true
        } else if ('run' in answer) {
          node.runId = answer.run.runId
          node.state = 'running'
          node.silent = 0
          this.report(node, answer.run, event.at, true)
        } else if (answer.busy) {
          node.busyTries++
          node.exitCode = answer.exitCode
          node.message = answer.message
          node.state = 'busy'
          node.retryAt = node.busyTries <= 1 ? event.at + this.settings.busyRetryMs : null
          if (node.retryAt === null) node.finishedAt = event.at
        } else {
          node.exitCode = answer.exitCode
          this.finish(node, 'refused', event.at, answer.message)
        }
      } else {
        const revert = node.revert
        if (!revert || revert.state !== 'starting') continue
        if (!answer) {
          revert.missed = true
        } else if ('run' in answer) {
          revert.runId = answer.run.runId
          revert.state = 'running'
          this.reportRevert(revert, answer.run, event.at)
        } else if (answer.busy && node.state === 'deadline' && node.runId !== null && revert.waited === undefined) {
          // Its own late run is still going (it missed --deadline, it did not stop): the
          // revert waits for that run to end, then goes, so that the run cannot land (and,
          // with --save, point the node at) the release this rollout judged failed after it.
          this.waitForLateRun(node, revert, event.at)
        } else if (answer.busy && event.at < (revert.busySince ?? event.at) + this.lateRunLimitMs()) {
          // Busy with some other run: tried again later, like a busy apply, for as long as a run may last.
          revert.busySince ??= event.at
          revert.state = 'busy'
          revert.retryAt = event.at + this.settings.busyRetryMs
          revert.message = `exit ${answer.exitCode}: ${answer.message} (tried again)`
        } else {
          revert.state = answer.busy ? 'busy' : 'refused'
          revert.message = `exit ${answer.exitCode}: ${answer.message}`
          revert.finishedAt = event.at
          if (revert.retryAt != null) revert.retryAt = null
        }
      }
    }
  }

  private onPolled(event: Extract<RolloutEvent, {kind: 'polled'}>): void {
    for (const name of event.nodes) {
      const node = this.node(name)
      if (!node) continue
      const answer = Object.hasOwn(event.answers, name) ? event.answers[name] : undefined
      if (node.state === 'running') {
        if (!answer) {
          node.silent++
          if (node.silent >= SILENT_POLLS) this.finish(node, 'no answer', event.at, `stopped answering while run ${node.runId} was running`)
        } else if (answer.runId === node.runId) {
          node.silent = 0
          this.report(node, answer, event.at)
        }
      } else if (node.revert?.state === 'running' || node.revert?.state === 'waiting') {
        // Its revert's run, or the late run the revert waits for.
        const revert = node.revert
        const waiting = revert.state === 'waiting'
        const runId = waiting ? revert.waitFor : revert.runId
        if (!answer) {
          revert.silent++
          if (revert.silent >= SILENT_POLLS) {
            revert.state = 'no answer'
            revert.message = waiting
              ? `stopped answering while its late run ${runId} was going: not reverted (that run may still land ${node.release ?? node.wanted})`
              : `stopped answering while run ${runId} was running`
            revert.finishedAt = event.at
          }
        } else if (answer.runId === runId) {
          revert.silent = 0
          if (!waiting) this.reportRevert(revert, answer, event.at)
          else if (RUN_FINAL.has(answer.state)) this.lateRunEnded(node, revert, answer)
        }
      }
    }
  }

  /** The revert of a node whose run missed --deadline waits for that run (polled) to end. */
  private waitForLateRun(node: RolloutNode, revert: RevertEntry, at: number): void {
    revert.state = 'waiting'
    revert.waitFor = node.runId!
    revert.waitingSince = at
    revert.dispatchedAt = null
    revert.message = `waiting for its late run ${node.runId} to end before reverting`
  }

  /** The late run ended: the revert goes now, and the record says what it waited for. */
  private lateRunEnded(node: RolloutNode, revert: RevertEntry, run: RunReport): void {
    const ok = RUN_OK.has(run.state)
    revert.waited = `waited for its late run ${run.runId} to end (${run.state}${ok && run.release ? ` on ${run.release}` : ''}), then reverted`
    revert.state = 'pending'
    revert.message = revert.waited
    // Only a run that succeeded can have moved the pointer (--save): then it is put back too.
    revert.save = this.settings.save && ok
    if (ok && run.release) node.release = run.release
    node.message = `${node.message ?? 'missed its --deadline'}; the run ended ${run.state} after it: the revert waited for it`
  }

  private onRechecked(event: Extract<RolloutEvent, {kind: 'rechecked'}>): void {
    if (event.group >= this.state.groups.length || this.state.rechecked[event.group]) return
    for (const name of event.nodes) {
      const node = this.node(name)
      if (!node || node.group !== event.group || node.state !== 'succeeded') continue
      const answer = Object.hasOwn(event.answers, name) ? event.answers[name] : undefined
      if (!answer) {
        this.finish(node, 'no answer', event.at, 'did not answer after the soak')
        continue
      }

      const newest = answer.newest
      if (newest && newest.runId !== node.runId && RUN_FINAL.has(newest.state) && !RUN_OK.has(newest.state) && newest.state !== 'busy') {
        this.finish(node, 'failed', event.at, `after the soak: run ${newest.runId} ${newest.state}${newest.message ? `: ${newest.message}` : ''}`)
      }
    }

    this.state.rechecked[event.group] = true
  }

  private onAdopted(event: Extract<RolloutEvent, {kind: 'adopted'}>): void {
    for (const name of event.nodes) {
      const node = this.node(name)
      if (!node) continue
      const answer = Object.hasOwn(event.answers, name) ? event.answers[name] : undefined
      const newest = answer?.newest ?? null
      if (node.state === 'starting') {
        if (answer && newest && this.startedSince(newest, node.dispatchedAt) && (newest.release === node.wanted || newest.ref === node.wanted || node.wanted === null)) {
          node.runId = newest.runId
          node.state = 'running'
          node.missed = undefined
          this.report(node, newest, event.at, true)
        } else if (node.missed) {
          node.missed = undefined
          this.finish(node, 'no answer', event.at, answer ? 'did not answer the apply request, and had started no run when asked again (one may still start)' : 'did not answer the apply request, nor a status request after it')
        } else {
          // The start never reached it (or it does not say): it goes back to exactly where it
          // was before that start (pending, or a busy node due for its retry), so that it is
          // started again in the order an uninterrupted rollout would have started it; a
          // node that is really gone is "no answer" to that start, as it would have been.
          if (node.busyTries > 0) {
            node.state = 'busy'
            node.retryAt = node.dispatchedAt
          } else {
            node.state = 'pending'
          }

          node.dispatchedAt = null
          if (node.group !== null) this.cursor[node.group] = 0
        }
      } else if (node.revert?.state === 'starting') {
        const revert = node.revert
        if (answer && newest && this.startedSince(newest, revert.dispatchedAt) && newest.release === revert.release) {
          revert.runId = newest.runId
          revert.state = 'running'
          revert.missed = undefined
          this.reportRevert(revert, newest, event.at)
        } else if (revert.missed) {
          revert.missed = undefined
          revert.state = 'no answer'
          revert.message = answer ? 'did not answer the rollback request, and had started no run when asked again' : 'did not answer the rollback request, nor a status request after it'
          revert.finishedAt = event.at
        } else {
          if (revert.busySince === undefined) {
            revert.state = 'pending'
          } else {
            revert.state = 'busy'
            revert.retryAt = revert.dispatchedAt
          }

          revert.dispatchedAt = null
        }
      }
    }
  }

  /**
   * A node whose run succeeded but that has applied another release since (another run came
   * after it: an operator's apply, a timer, a rollout this one could not know of) is not on
   * REF: it is "overtaken", so that the rollout does not exit 0 over a fleet left mixed. It
   * is not counted (it did not fail) and not reverted (what moved it is not ours to undo). A
   * node that does not answer keeps its success: its run did succeed, and nothing says more.
   */
  private onVerified(event: Extract<RolloutEvent, {kind: 'verified'}>): void {
    if (this.state.verify !== 'due') return
    for (const name of event.nodes) {
      const node = this.node(name)
      const answer = Object.hasOwn(event.answers, name) ? event.answers[name] : undefined
      if (!node || node.state !== 'succeeded' || !answer || node.release === null || answer.applied === node.release) continue
      const newest = answer.newest
      this.finish(node, 'overtaken', event.at, `not on ${node.release} when the rollout ended: ${answer.applied ?? 'nothing'} was applied since${newest && newest.runId !== node.runId ? ` (its newest run ${newest.runId}: ${newest.state}${newest.release ? ` ${newest.release}` : ''})` : ''}`)
    }

    this.state.verify = 'done'
  }

  private onProbed(event: Extract<RolloutEvent, {kind: 'probed'}>): void {
    for (const name of event.nodes) {
      const node = this.node(name)
      if (!node || node.state !== 'pending' || node.surveyed) continue
      const answer = Object.hasOwn(event.answers, name) ? event.answers[name] : undefined
      if (answer) {
        node.surveyed = true
        node.before = answer.applied
        node.pointerBefore = answer.pointer
        node.wanted = this.settings.ref ?? answer.pointer
      } else {
        this.finish(node, 'no answer', event.at, 'did not answer the survey, nor a status request at its turn: not started')
      }
    }
  }

  private startedSince(run: RunReport, dispatchedAt: number | null): boolean {
    const started = run.startedAt ? Date.parse(run.startedAt) : Number.NaN
    return dispatchedAt !== null && Number.isFinite(started) && started >= dispatchedAt - CLOCK_SKEW_MS && run.state !== 'busy'
  }

  // ---- reports ----

  /** A run's report: kept when the run is final (or `always`, for the answer to a start). */
  private report(node: RolloutNode, run: RunReport, at: number, always = false): void {
    const final = RUN_FINAL.has(run.state)
    if (!final && !always) return
    node.release = run.release ?? node.release
    if (run.resources) node.resources = {changed: run.resources.changed, failed: run.resources.failed, outOfSync: run.resources.outOfSync}
    if (run.durationMs !== undefined && run.durationMs !== null) node.durationMs = run.durationMs
    if (run.exitCode !== undefined && run.exitCode !== null) node.exitCode = run.exitCode
    if (run.noop !== undefined) node.noop = run.noop
    if (!final) return
    if (RUN_OK.has(run.state)) this.finish(node, 'succeeded', at, run.state === 'skipped' ? (run.message ?? 'skipped') : null)
    else if (run.state === 'refused') this.finish(node, 'refused', at, run.message ?? 'refused')
    else if (run.state === 'busy') this.finish(node, 'busy', at, run.message ?? 'another run was in progress')
    else this.finish(node, 'failed', at, run.message ?? `run ${run.state}`)
  }

  private reportRevert(revert: RevertEntry, run: RunReport, at: number): void {
    if (!RUN_FINAL.has(run.state)) return
    revert.state = RUN_OK.has(run.state) ? 'succeeded' : run.state === 'refused' ? 'refused' : run.state === 'busy' ? 'busy' : 'failed'
    revert.message = RUN_OK.has(run.state) ? (revert.waited ?? null) : `${run.message ?? `run ${run.state}`}${revert.waited ? ` (${revert.waited.replace(/, then reverted$/, '')})` : ''}`
    revert.finishedAt = at
  }

  private finish(node: RolloutNode, state: NodeState, at: number, message: string | null): void {
    node.state = state
    node.finishedAt = at
    node.retryAt = null
    if (message !== null || state === 'succeeded') node.message = message
  }

  // ---- time and progress ----

  private checkDeadlines(at: number): void {
    const limit = this.settings.deadlineMs
    const minutes = `${Math.round(limit / 1000)}s`
    for (const i of [...this.active]) {
      const node = this.state.nodes[i]
      const before = node.state
      const revertBefore = node.revert?.state
      if ((node.state === 'starting' || node.state === 'running') && node.dispatchedAt !== null && at >= node.dispatchedAt + limit) {
        this.finish(node, 'deadline', at, `no final run within --deadline ${minutes}${node.runId ? ` (run ${node.runId} still running)` : ''}`)
      }

      // A revert (and the late run it waits for) has as long as a run may last.
      const revert = node.revert
      const revertLimit = this.lateRunLimitMs()
      if (revert && (revert.state === 'starting' || revert.state === 'running') && revert.dispatchedAt !== null && at >= revert.dispatchedAt + revertLimit) {
        revert.state = 'deadline'
        revert.message = `no final run within ${span(revertLimit)}`
        revert.finishedAt = at
      }

      if (revert?.state === 'waiting' && revert.waitingSince !== undefined && at >= revert.waitingSince + revertLimit) {
        revert.state = 'deadline'
        revert.message = `its late run ${revert.waitFor} did not end within ${span(revertLimit)} more: not reverted (that run may still land ${node.release ?? node.wanted})`
        revert.finishedAt = at
      }

      if (node.state !== before || node.revert?.state !== revertBefore) this.reindex(i)
    }
  }

  /** The first group not yet done (settled, soaked and rechecked), or null. */
  private currentGroup(): number | null {
    const {state} = this
    for (let g = 0; g < state.groups.length; g++) {
      if (state.settledAt[g] === null) return g
      if (!state.rechecked[g]) return g
    }

    return null
  }

  /**
   * How long a revert has, and how long it waits for the late run it must not go into: as
   * long as a run may last (its --timeout and 5 minutes, or an hour without one), and at
   * least --deadline. Giving up sooner would only report a revert failed that goes on; the
   * agent cannot stop a run; Ctrl-C stops the wait, and --resume goes on with it.
   */
  private lateRunLimitMs(): number {
    const {timeoutSeconds, deadlineMs} = this.settings
    return Math.max(deadlineMs, timeoutSeconds === null ? DEFAULT_DEADLINE_MS : timeoutSeconds * 1000 + 5 * 60_000)
  }

  private windowed(group: number): boolean {
    return this.settings.window !== null && !(this.settings.canary > 0 && group === 0)
  }

  /** The next moment something is due without any answer: a deadline, a busy retry, a soak's end. */
  private nextWake(now: number): number | null {
    const {state} = this
    let wake = Number.POSITIVE_INFINITY
    for (const i of this.active) {
      const node = state.nodes[i]
      if ((node.state === 'starting' || node.state === 'running') && node.dispatchedAt !== null) wake = Math.min(wake, node.dispatchedAt + this.settings.deadlineMs)
      if (node.state === 'busy' && node.retryAt !== null && state.stopped === null) wake = Math.min(wake, node.retryAt)
      const revert = node.revert
      if (revert && (revert.state === 'starting' || revert.state === 'running') && revert.dispatchedAt !== null) wake = Math.min(wake, revert.dispatchedAt + this.lateRunLimitMs())
      if (revert?.state === 'waiting' && revert.waitingSince !== undefined) wake = Math.min(wake, revert.waitingSince + this.lateRunLimitMs())
      if (revert?.state === 'busy' && revert.retryAt != null) wake = Math.min(wake, revert.retryAt)
    }

    const group = state.phase === 'rolling' && state.stopped === null ? this.currentGroup() : null
    if (group !== null && state.settledAt[group] !== null && !state.rechecked[group]) wake = Math.min(wake, state.settledAt[group]! + this.settings.soakMs)
    return Number.isFinite(wake) ? Math.max(wake, now) : null
  }

  private advance(at: number): void {
    const {state, settings} = this
    if (state.phase === 'survey' || state.phase === 'done') return
    if (state.phase === 'rolling') {
      if (state.stopped === null && this.failures() > state.allowedFailures) {
        const failed = state.nodes.filter((node) => COUNTED_STATES.includes(node.state))
        state.stopped = `${failed.length} node${failed.length === 1 ? '' : 's'} did not succeed (${failed
          .slice(0, 5)
          .map((node) => `${node.node} ${node.state}`)
          .join(', ')}${failed.length > 5 ? ', ...' : ''}), more than --max-failures ${formatStep(settings.maxFailures)} allows (${state.allowedFailures})`
      }

      // Groups whose nodes are all final are settled: their soak starts now.
      for (let g = 0; g < state.groups.length; g++) {
        if (state.settledAt[g] !== null) continue
        if (this.unfinished[g] === 0) {
          state.settledAt[g] = at
          // No soak, or nothing succeeded to ask again about: the group is done.
          if (settings.soakMs === 0 || !state.groups[g].some((i) => state.nodes[i].state === 'succeeded')) state.rechecked[g] = true
        }

        break
      }

      const inFlight = this.count('s:starting') + this.count('s:running') > 0
      const allDone = this.currentGroup() === null
      if (inFlight || (!allDone && state.stopped === null)) return
      // Stopped (or done): nothing more starts. A busy node waiting for its retry stays busy.
      for (const node of state.nodes) {
        if (node.state === 'pending') this.finish(node, 'not started', at, state.stopped ? 'not started: the rollout stopped' : null)
        else if (node.state === 'busy' && node.retryAt !== null) this.finish(node, 'busy', at, `${node.message ?? 'busy'} (not tried again: the rollout stopped)`)
      }

      // One last question before the end (and before any revert): are the nodes that
      // succeeded still on what they ran? A --noop rollout applied nothing to ask about.
      if (state.verify !== 'done' && !settings.noop && this.count('s:succeeded') > 0) {
        state.verify = 'due'
        this.reindexAll()
        return
      }

      this.planReverts(at)
      this.reindexAll()
      state.phase = this.count('r:pending') + this.count('r:waiting') > 0 ? 'reverting' : 'done'
    }

    if (state.phase === 'reverting' && ![...this.active].some((i) => revertActive(state.nodes[i].revert))) state.phase = 'done'
    if (state.phase === 'done') state.finishedAt = at
  }

  /**
   * Who goes back: with `failed`, every node whose run of the release failed (or did not end
   * within its deadline, or failed after the soak); with `all`, when the rollout stopped,
   * every node it moved too. A node goes back only to the release it had before, and only
   * when that is another release than the one that failed (no revert loops); no release
   * before is "no target", said, not an error. A --noop rollout changed nothing.
   */
  private planReverts(at: number): void {
    const {settings, state} = this
    if (settings.revert === 'none' || settings.noop) return
    for (const node of state.nodes) {
      const failed = node.state === 'failed' || node.state === 'deadline'
      const moved = node.state === 'succeeded' && settings.revert === 'all' && state.stopped !== null
      if (!failed && !moved) continue
      // A run that missed its deadline may still succeed, and with --save point the node at REF: its revert saves too.
      const entry: RevertEntry = {state: 'pending', release: node.before, save: settings.save && (node.state === 'succeeded' || node.state === 'deadline'), runId: null, dispatchedAt: null, finishedAt: null, message: null, silent: 0}
      if (node.before === null) {
        entry.state = 'no target'
        entry.message = 'no release succeeded on it before this rollout: nothing to go back to'
      } else if (node.before === node.release || (node.release === null && node.before === node.wanted)) {
        entry.state = 'not needed'
        entry.message = `it was on ${node.before} before this rollout`
      } else if (node.state === 'deadline' && node.runId !== null) {
        this.waitForLateRun(node, entry, at)
      }

      node.revert = entry
    }
  }
}

/**
 * What an event can change of a node besides its state: enough to tell whether an answer
 * did anything (a report is kept only with a state change, so its fields need no place here).
 */
function nodeKey(node: RolloutNode | undefined): string {
  if (!node) return ''
  const revert = node.revert
  return `${node.state}|${node.runId}|${node.silent}|${node.retryAt}|${node.busyTries}|${node.dispatchedAt}|${node.missed === true}|${node.surveyed}|${revert ? `${revert.state}|${revert.runId}|${revert.silent}|${revert.dispatchedAt}|${revert.missed === true}|${revert.retryAt}|${revert.waitFor}` : ''}`
}

/** A limit as a person reads it: 90s, 65 min. */
const span = (ms: number): string => (ms >= 60_000 ? `${Math.round(ms / 60_000)} min` : `${Math.round(ms / 1000)}s`)

/** --only-outdated: the node's newest attempt is a completed success, not noop, of exactly what is wanted. */
function upToDate(wanted: string | null, answer: NodeReport): boolean {
  const newest = answer.newest
  if (wanted === null || !/\/tags\//.test(wanted) || !newest) return false
  return RUN_OK.has(newest.state) && newest.noop !== true && newest.release === wanted && answer.applied === wanted
}
