import {NodeIndex, newRolloutState} from './nodes.js'
import {RUN_FINAL, RUN_OK, finishNode, lateRunEnded, nodeKey, reportRevert, reportRun, startedSince, upToDate, waitForLateRun} from './node-reports.js'
import {type EngineParts, advance, checkDeadlines, currentGroup, lateRunLimitMs, nextWake, windowed} from './schedule.js'
import {type RolloutSettings, cutBatches, stepSize} from './settings.js'
import type {NodeReport, RolloutAction, RolloutEvent, RolloutNode, RolloutState, RunReport} from './types.js'

export {COUNTED_STATES, FINAL_STATES} from './nodes.js'

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
 *
 * Its pieces: nodes.ts (the first state and the derived index), node-reports.ts (what an
 * answer does to one node), schedule.ts (deadlines, groups, moving on, who goes back).
 */

/** A node two polls in a row silent while its run is going has stopped answering. */
const SILENT_POLLS = 2
/** The longest a poll waits for runs to end before the engine looks again. */
export const POLL_WAIT_MS = 10_000

/**
 * One rollout's decisions. `handle` takes an event and returns whether it changed
 * anything (an event that changed nothing need not be recorded); `next` says what to do
 * now and never changes the state.
 */
export class RolloutEngine {
  readonly state: RolloutState
  private readonly index = new Map<string, number>()
  /** Derived from the state, never recorded (see NodeIndex). */
  private readonly ix: NodeIndex
  /** What the schedule's functions read and change. */
  private readonly parts: EngineParts

  constructor(
    readonly settings: RolloutSettings,
    expected: string[],
  ) {
    // In the order given: the fleet's, in natural name order (expectedFleet), or a record's as it was recorded.
    const names = [...new Set(expected)]
    this.state = newRolloutState(settings, names)
    this.ix = new NodeIndex(this.state)
    this.parts = {state: this.state, settings, ix: this.ix}
    names.forEach((node, i) => this.index.set(node, i))
    this.ix.reindexAll()
  }

  node(name: string): RolloutNode | undefined {
    const i = this.index.get(name)
    return i === undefined ? undefined : this.state.nodes[i]
  }

  get done(): boolean {
    return this.state.phase === 'done'
  }

  failures(): number {
    return this.ix.failures()
  }

  /** What to do now. Pure: the same state and time always give the same actions. */
  next(now: number): RolloutAction[] {
    const {state} = this
    if (state.phase === 'done') return [{kind: 'done'}]
    if (state.phase === 'survey') return [{kind: 'survey', nodes: state.nodes.map((node) => node.node)}]
    const actions: RolloutAction[] = []
    // Starts whose answer was lost (the process died between sending and recording, or the
    // node did not answer in time): ask the node.
    const active = this.ix.activeNodes()
    const orphans = active.filter((node) => node.state === 'starting' || node.revert?.state === 'starting').map((node) => node.node)
    if (orphans.length > 0) return [{kind: 'adopt', nodes: orphans}]
    if (state.phase === 'rolling' && state.verify === 'due') return [{kind: 'verify', nodes: state.nodes.filter((node) => node.state === 'succeeded').map((node) => node.node)}]

    if (state.phase === 'rolling' && state.stopped === null) {
      const group = currentGroup(this.state)
      if (group !== null) {
        const settled = state.settledAt[group]
        if (settled === null) {
          const inGroup = active.filter((node) => node.group === group)
          const inFlight = inGroup.filter((node) => node.state === 'running' || node.state === 'starting').length
          const room = windowed(this.settings, group) ? Math.max(0, (this.settings.window ?? 0) - inFlight) : Number.POSITIVE_INFINITY
          // Busy nodes due for their retry first, then pending ones in name order.
          const ready = inGroup.filter((node) => node.state === 'busy' && node.retryAt !== null && node.retryAt <= now).slice(0, room)
          const members = state.groups[group]
          let at = this.ix.cursor[group] ?? 0
          while (at < members.length && state.nodes[members[at]].state !== 'pending') at++
          this.ix.cursor[group] = at
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

    const wake = nextWake(this.parts, now)
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

    if (event.kind === 'surveyed') this.ix.reindexAll()
    else for (const i of touched) this.ix.reindex(i)
    checkDeadlines(this.parts, event.at)
    advance(this.parts, event.at)
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
    return `${phase}|${stopped}|${settledAt.join()}|${rechecked.join()}|${finishedAt}|${this.ix.moves}|${verify}`
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
          reportRun(node, answer.run, event.at, true)
        } else if (answer.busy) {
          node.busyTries++
          node.exitCode = answer.exitCode
          node.message = answer.message
          node.state = 'busy'
          node.retryAt = node.busyTries <= 1 ? event.at + this.settings.busyRetryMs : null
          if (node.retryAt === null) node.finishedAt = event.at
        } else {
          node.exitCode = answer.exitCode
          finishNode(node, 'refused', event.at, answer.message)
        }
      } else {
        const revert = node.revert
        if (!revert || revert.state !== 'starting') continue
        if (!answer) {
          revert.missed = true
        } else if ('run' in answer) {
          revert.runId = answer.run.runId
          revert.state = 'running'
          reportRevert(revert, answer.run, event.at)
        } else if (answer.busy && node.state === 'deadline' && node.runId !== null && revert.waited === undefined) {
          // Its own late run is still going (it missed --deadline, it did not stop): the
          // revert waits for that run to end, then goes, so that the run cannot land (and,
          // with --save, point the node at) the release this rollout judged failed after it.
          waitForLateRun(node, revert, event.at)
        } else if (answer.busy && event.at < (revert.busySince ?? event.at) + lateRunLimitMs(this.settings)) {
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
          if (node.silent >= SILENT_POLLS) finishNode(node, 'no answer', event.at, `stopped answering while run ${node.runId} was running`)
        } else if (answer.runId === node.runId) {
          node.silent = 0
          reportRun(node, answer, event.at)
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
          if (!waiting) reportRevert(revert, answer, event.at)
          else if (RUN_FINAL.has(answer.state)) lateRunEnded(node, revert, answer, this.settings)
        }
      }
    }
  }

  private onRechecked(event: Extract<RolloutEvent, {kind: 'rechecked'}>): void {
    if (event.group >= this.state.groups.length || this.state.rechecked[event.group]) return
    for (const name of event.nodes) {
      const node = this.node(name)
      if (!node || node.group !== event.group || node.state !== 'succeeded') continue
      const answer = Object.hasOwn(event.answers, name) ? event.answers[name] : undefined
      if (!answer) {
        finishNode(node, 'no answer', event.at, 'did not answer after the soak')
        continue
      }

      const newest = answer.newest
      if (newest && newest.runId !== node.runId && RUN_FINAL.has(newest.state) && !RUN_OK.has(newest.state) && newest.state !== 'busy') {
        finishNode(node, 'failed', event.at, `after the soak: run ${newest.runId} ${newest.state}${newest.message ? `: ${newest.message}` : ''}`)
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
        if (answer && newest && startedSince(newest, node.dispatchedAt) && (newest.release === node.wanted || newest.ref === node.wanted || node.wanted === null)) {
          node.runId = newest.runId
          node.state = 'running'
          node.missed = undefined
          reportRun(node, newest, event.at, true)
        } else if (node.missed) {
          node.missed = undefined
          finishNode(node, 'no answer', event.at, answer ? 'did not answer the apply request, and had started no run when asked again (one may still start)' : 'did not answer the apply request, nor a status request after it')
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
          if (node.group !== null) this.ix.cursor[node.group] = 0
        }
      } else if (node.revert?.state === 'starting') {
        const revert = node.revert
        if (answer && newest && startedSince(newest, revert.dispatchedAt) && newest.release === revert.release) {
          revert.runId = newest.runId
          revert.state = 'running'
          revert.missed = undefined
          reportRevert(revert, newest, event.at)
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
      finishNode(node, 'overtaken', event.at, `not on ${node.release} when the rollout ended: ${answer.applied ?? 'nothing'} was applied since${newest && newest.runId !== node.runId ? ` (its newest run ${newest.runId}: ${newest.state}${newest.release ? ` ${newest.release}` : ''})` : ''}`)
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
        finishNode(node, 'no answer', event.at, 'did not answer the survey, nor a status request at its turn: not started')
      }
    }
  }

  // ---- reports ----

  // ---- time and progress ----

}
