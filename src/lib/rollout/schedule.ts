import {DEFAULT_DEADLINE_MS, type RolloutSettings, formatStep} from './settings.js'
import {COUNTED_STATES, type NodeIndex, revertActive} from './nodes.js'
import {finishNode, span, waitForLateRun} from './node-reports.js'
import type {RevertEntry, RolloutState} from './types.js'

/*
 * Time and progress of a rollout: deadlines, the group in turn and its window, the next
 * moment something is due, moving on (settling, soaking, stopping, verifying, reverting)
 * and who goes back. Functions of the engine's state, settings and derived index.
 */

/** What these functions read and change of an engine. */
export interface EngineParts {
  readonly state: RolloutState
  readonly settings: RolloutSettings
  readonly ix: NodeIndex
}

/** Runs (and reverts, and the late runs reverts wait for) past their time end as deadline. */
export function checkDeadlines(r: EngineParts, at: number): void {
  const limit = r.settings.deadlineMs
  const minutes = `${Math.round(limit / 1000)}s`
  for (const i of [...r.ix.active]) {
    const node = r.state.nodes[i]
    const before = node.state
    const revertBefore = node.revert?.state
    if ((node.state === 'starting' || node.state === 'running') && node.dispatchedAt !== null && at >= node.dispatchedAt + limit) {
      finishNode(node, 'deadline', at, `no final run within --deadline ${minutes}${node.runId ? ` (run ${node.runId} still running)` : ''}`)
    }

    // A revert (and the late run it waits for) has as long as a run may last.
    const revert = node.revert
    const revertLimit = lateRunLimitMs(r.settings)
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

    if (node.state !== before || node.revert?.state !== revertBefore) r.ix.reindex(i)
  }
}

/** The first group not yet done (settled, soaked and rechecked), or null. */
export function currentGroup(state: RolloutState): number | null {
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
export function lateRunLimitMs(settings: RolloutSettings): number {
  const {timeoutSeconds, deadlineMs} = settings
  return Math.max(deadlineMs, timeoutSeconds === null ? DEFAULT_DEADLINE_MS : timeoutSeconds * 1000 + 5 * 60_000)
}

export function windowed(settings: RolloutSettings, group: number): boolean {
  return settings.window !== null && !(settings.canary > 0 && group === 0)
}

/** The next moment something is due without any answer: a deadline, a busy retry, a soak's end. */
export function nextWake(r: EngineParts, now: number): number | null {
  const {state} = r
  let wake = Number.POSITIVE_INFINITY
  for (const i of r.ix.active) {
    const node = state.nodes[i]
    if ((node.state === 'starting' || node.state === 'running') && node.dispatchedAt !== null) wake = Math.min(wake, node.dispatchedAt + r.settings.deadlineMs)
    if (node.state === 'busy' && node.retryAt !== null && state.stopped === null) wake = Math.min(wake, node.retryAt)
    const revert = node.revert
    if (revert && (revert.state === 'starting' || revert.state === 'running') && revert.dispatchedAt !== null) wake = Math.min(wake, revert.dispatchedAt + lateRunLimitMs(r.settings))
    if (revert?.state === 'waiting' && revert.waitingSince !== undefined) wake = Math.min(wake, revert.waitingSince + lateRunLimitMs(r.settings))
    if (revert?.state === 'busy' && revert.retryAt != null) wake = Math.min(wake, revert.retryAt)
  }

  const group = state.phase === 'rolling' && state.stopped === null ? currentGroup(r.state) : null
  if (group !== null && state.settledAt[group] !== null && !state.rechecked[group]) wake = Math.min(wake, state.settledAt[group]! + r.settings.soakMs)
  return Number.isFinite(wake) ? Math.max(wake, now) : null
}

/** Moves the rollout on: stops it past --max-failures, settles groups, and ends it (verify, reverts, done). */
export function advance(r: EngineParts, at: number): void {
  const {state, settings} = r
  if (state.phase === 'survey' || state.phase === 'done') return
  if (state.phase === 'rolling') {
    if (state.stopped === null && r.ix.failures() > state.allowedFailures) {
      const failed = state.nodes.filter((node) => COUNTED_STATES.includes(node.state))
      state.stopped = `${failed.length} node${failed.length === 1 ? '' : 's'} did not succeed (${failed
        .slice(0, 5)
        .map((node) => `${node.node} ${node.state}`)
        .join(', ')}${failed.length > 5 ? ', ...' : ''}), more than --max-failures ${formatStep(settings.maxFailures)} allows (${state.allowedFailures})`
    }

    // Groups whose nodes are all final are settled: their soak starts now.
    for (let g = 0; g < state.groups.length; g++) {
      if (state.settledAt[g] !== null) continue
      if (r.ix.unfinished[g] === 0) {
        state.settledAt[g] = at
        // No soak, or nothing succeeded to ask again about: the group is done.
        if (settings.soakMs === 0 || !state.groups[g].some((i) => state.nodes[i].state === 'succeeded')) state.rechecked[g] = true
      }

      break
    }

    const inFlight = r.ix.count('s:starting') + r.ix.count('s:running') > 0
    const allDone = currentGroup(r.state) === null
    if (inFlight || (!allDone && state.stopped === null)) return
    // Stopped (or done): nothing more starts. A busy node waiting for its retry stays busy.
    for (const node of state.nodes) {
      if (node.state === 'pending') finishNode(node, 'not started', at, state.stopped ? 'not started: the rollout stopped' : null)
      else if (node.state === 'busy' && node.retryAt !== null) finishNode(node, 'busy', at, `${node.message ?? 'busy'} (not tried again: the rollout stopped)`)
    }

    // One last question before the end (and before any revert): are the nodes that
    // succeeded still on what they ran? A --noop rollout applied nothing to ask about.
    if (state.verify !== 'done' && !settings.noop && r.ix.count('s:succeeded') > 0) {
      state.verify = 'due'
      r.ix.reindexAll()
      return
    }

    planReverts(r.state, r.settings, at)
    r.ix.reindexAll()
    state.phase = r.ix.count('r:pending') + r.ix.count('r:waiting') > 0 ? 'reverting' : 'done'
  }

  if (state.phase === 'reverting' && ![...r.ix.active].some((i) => revertActive(state.nodes[i].revert))) state.phase = 'done'
  if (state.phase === 'done') state.finishedAt = at
}

/**
 * Who goes back: with `failed`, every node whose run of the release failed (or did not end
 * within its deadline, or failed after the soak); with `all`, when the rollout stopped,
 * every node it moved too. A node goes back only to the release it had before, and only
 * when that is another release than the one that failed (no revert loops); no release
 * before is "no target", said, not an error. A --noop rollout changed nothing.
 */
export function planReverts(state: RolloutState, settings: RolloutSettings, at: number): void {
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
      waitForLateRun(node, entry, at)
    }

    node.revert = entry
  }
}
