import type {RolloutSettings} from './settings.js'
import type {NodeReport, NodeState, RevertEntry, RolloutNode, RunReport} from './types.js'

/*
 * What a node's answers do to it: a run's report kept on the node (and the state it ends
 * in), a revert's, a run recognised as the one a start began, and a revert that waits for a
 * late run. Pure functions on one node; the engine decides when they apply.
 */

/** Run record states that are a success, and those that are final. */
export const RUN_OK = new Set(['succeeded', 'skipped'])
export const RUN_FINAL = new Set(['succeeded', 'skipped', 'failed', 'error', 'interrupted', 'refused', 'busy'])
/** How far a node's clock may be behind ours when a resumed rollout recognises a run it started. */
const CLOCK_SKEW_MS = 120_000

export function startedSince(run: RunReport, dispatchedAt: number | null): boolean {
  const started = run.startedAt ? Date.parse(run.startedAt) : Number.NaN
  return dispatchedAt !== null && Number.isFinite(started) && started >= dispatchedAt - CLOCK_SKEW_MS && run.state !== 'busy'
}

/** A run's report: kept when the run is final (or `always`, for the answer to a start). */
export function reportRun(node: RolloutNode, run: RunReport, at: number, always = false): void {
  const final = RUN_FINAL.has(run.state)
  if (!final && !always) return
  node.release = run.release ?? node.release
  if (run.resources) node.resources = {changed: run.resources.changed, failed: run.resources.failed, outOfSync: run.resources.outOfSync}
  if (run.durationMs !== undefined && run.durationMs !== null) node.durationMs = run.durationMs
  if (run.exitCode !== undefined && run.exitCode !== null) node.exitCode = run.exitCode
  if (run.noop !== undefined) node.noop = run.noop
  if (!final) return
  if (RUN_OK.has(run.state)) finishNode(node, 'succeeded', at, run.state === 'skipped' ? (run.message ?? 'skipped') : null)
  else if (run.state === 'refused') finishNode(node, 'refused', at, run.message ?? 'refused')
  else if (run.state === 'busy') finishNode(node, 'busy', at, run.message ?? 'another run was in progress')
  else finishNode(node, 'failed', at, run.message ?? `run ${run.state}`)
}

export function reportRevert(revert: RevertEntry, run: RunReport, at: number): void {
  if (!RUN_FINAL.has(run.state)) return
  revert.state = RUN_OK.has(run.state) ? 'succeeded' : run.state === 'refused' ? 'refused' : run.state === 'busy' ? 'busy' : 'failed'
  revert.message = RUN_OK.has(run.state) ? (revert.waited ?? null) : `${run.message ?? `run ${run.state}`}${revert.waited ? ` (${revert.waited.replace(/, then reverted$/, '')})` : ''}`
  revert.finishedAt = at
}

export function finishNode(node: RolloutNode, state: NodeState, at: number, message: string | null): void {
  node.state = state
  node.finishedAt = at
  node.retryAt = null
  if (message !== null || state === 'succeeded') node.message = message
}

/** The revert of a node whose run missed --deadline waits for that run (polled) to end. */
export function waitForLateRun(node: RolloutNode, revert: RevertEntry, at: number): void {
  revert.state = 'waiting'
  revert.waitFor = node.runId!
  revert.waitingSince = at
  revert.dispatchedAt = null
  revert.message = `waiting for its late run ${node.runId} to end before reverting`
}

/** The late run ended: the revert goes now, and the record says what it waited for. */
export function lateRunEnded(node: RolloutNode, revert: RevertEntry, run: RunReport, settings: Pick<RolloutSettings, 'save'>): void {
  const ok = RUN_OK.has(run.state)
  revert.waited = `waited for its late run ${run.runId} to end (${run.state}${ok && run.release ? ` on ${run.release}` : ''}), then reverted`
  revert.state = 'pending'
  revert.message = revert.waited
  // Only a run that succeeded can have moved the pointer (--save): then it is put back too.
  revert.save = settings.save && ok
  if (ok && run.release) node.release = run.release
  node.message = `${node.message ?? 'missed its --deadline'}; the run ended ${run.state} after it: the revert waited for it`
}

/**
 * What an event can change of a node besides its state: enough to tell whether an answer
 * did anything (a report is kept only with a state change, so its fields need no place here).
 */
export function nodeKey(node: RolloutNode | undefined): string {
  if (!node) return ''
  const revert = node.revert
  return `${node.state}|${node.runId}|${node.silent}|${node.retryAt}|${node.busyTries}|${node.dispatchedAt}|${node.missed === true}|${node.surveyed}|${revert ? `${revert.state}|${revert.runId}|${revert.silent}|${revert.dispatchedAt}|${revert.missed === true}|${revert.retryAt}|${revert.waitFor}` : ''}`
}

/** A limit as a person reads it: 90s, 65 min. */
export const span = (ms: number): string => (ms >= 60_000 ? `${Math.round(ms / 60_000)} min` : `${Math.round(ms / 1000)}s`)

/** --only-outdated: the node's newest attempt is a completed success, not noop, of exactly what is wanted. */
export function upToDate(wanted: string | null, answer: NodeReport): boolean {
  const newest = answer.newest
  if (wanted === null || !/\/tags\//.test(wanted) || !newest) return false
  return RUN_OK.has(newest.state) && newest.noop !== true && newest.release === wanted && answer.applied === wanted
}
