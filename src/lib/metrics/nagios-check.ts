import type {NodeState} from '../state/node-state.js'
import {type RunRecord, newestRecord, signedExpiry} from '../state/run-record.js'
import {formatAge} from '../util/duration.js'
import {expiryWarning} from '../repository/index-expiry.js'

/** Nagios/Icinga plugin states and their exit codes. */
export const CHECK_CODES = {OK: 0, WARNING: 1, CRITICAL: 2, UNKNOWN: 3} as const
export type CheckStatus = keyof typeof CHECK_CODES

/** status --check's defaults: the newest success may be this old before WARNING, CRITICAL. */
export const DEFAULT_CHECK_WARN = '2h'
export const DEFAULT_CHECK_CRIT = '6h'

export interface CheckResult {
  status: CheckStatus
  exitCode: number
  /** The one line a plugin prints: `LOCALPUPPET OK - ... | perfdata`. */
  line: string
  /** Seconds since the newest success, or null when there is none. */
  ageSeconds: number | null
}

const isSuccess = (record: RunRecord) => record.state === 'succeeded' || record.state === 'skipped'

/**
 * A Nagios/Icinga plugin's verdict on the node. CRITICAL: the newest attempt failed, errored
 * or was refused, the repository index last read expired, or the newest success is older
 * than `critMs` (or there is none); WARNING: older than `warnMs`, interrupted, a fetch fell
 * back, the index expires within a week, or Puppet disabled; else OK. A run in progress is
 * judged by what came before it; busy attempts never count. Perfdata: the age of the
 * newest success with its thresholds, and the newest run Puppet reported on.
 */
export function checkNode(state: NodeState, disabled: {message: string} | null, warnMs: number, critMs: number, now = new Date()): CheckResult {
  if (state.records.length === 0) return result('UNKNOWN', 'no runs yet', null, warnMs, critMs, null, null)
  const lastSuccess = newestRecord(state.records, isSuccess)
  const ageMs = lastSuccess ? now.getTime() - Date.parse(lastSuccess.finishedAt ?? lastSuccess.startedAt) : null
  const newest = newestRecord(state.records, (record) => record.state !== 'running' && record.state !== 'busy')
  const reported = newestRecord(state.records, (record) => record.resources !== null && record.state !== 'running')
  const problems: Array<[CheckStatus, string]> = []
  if (newest && ['failed', 'error', 'refused'].includes(newest.state)) problems.push(['CRITICAL', `${newest.state}: ${newest.release ?? newest.ref ?? '-'}: ${newest.error ?? `exit ${newest.exitCode}`}`])
  if (newest?.state === 'interrupted') problems.push(['WARNING', `interrupted: ${newest.error ?? ''}`])
  // The node enforced what it had: the repository outage is worth a look, not a page.
  if (newest?.fetch?.fallback) problems.push(['WARNING', `fetch failed, ran the installed ${newest.release}: ${newest.fetch.error ?? newest.fetch.source}`])
  // The index's expiry: a week ahead, time to fix the re-signing; past it, the node takes nothing new.
  const indexed = newestRecord(state.records, (record) => Boolean(signedExpiry(record.fetch)))?.fetch
  const expires = signedExpiry(indexed)
  const expiry = indexed && expires ? expiryWarning(`${indexed.nodeDocument ? "this node's document" : 'index'} of ${indexed.source}`, expires, now.getTime()) : null
  if (expiry) problems.push([Date.parse(expires!) <= now.getTime() ? 'CRITICAL' : 'WARNING', expiry])
  if (disabled) problems.push(['WARNING', `puppet is disabled: ${disabled.message}`])
  if (ageMs === null) problems.push(['CRITICAL', 'no successful run yet'])
  else if (ageMs >= critMs) problems.push(['CRITICAL', `last success ${formatAge(ageMs)} ago (critical at ${formatAge(critMs)})`])
  else if (ageMs >= warnMs) problems.push(['WARNING', `last success ${formatAge(ageMs)} ago (warning at ${formatAge(warnMs)})`])
  const status: CheckStatus = problems.some(([level]) => level === 'CRITICAL') ? 'CRITICAL' : problems.length > 0 ? 'WARNING' : 'OK'
  const success = lastSuccess ? `last success ${lastSuccess.release} ${formatAge(ageMs!)} ago (run ${lastSuccess.id}, ${lastSuccess.state})` : ''
  const summary = [...problems.filter(([level]) => level === status).map(([, text]) => text), ...(status === 'OK' || !problems.some(([, text]) => text.startsWith('last success')) ? [success] : [])]
    .filter((text) => text !== '')
    .join('; ')
  return result(status, summary, ageMs, warnMs, critMs, reported, state.lastCompleted)
}

function result(
  status: CheckStatus,
  summary: string,
  ageMs: number | null,
  warnMs: number,
  critMs: number,
  reported: RunRecord | null,
  completed: RunRecord | null,
): CheckResult {
  const ageSeconds = ageMs === null ? null : Math.round(ageMs / 1000)
  const perf = [`age=${ageSeconds === null ? 'U' : `${ageSeconds}s`};${warnMs / 1000};${critMs / 1000};0`]
  if (reported?.resources) {
    const r = reported.resources
    perf.push(`changed=${r.changed};;;0`, `failed=${r.failed};;;0`, `out_of_sync=${r.outOfSync};;;0`, `total=${r.total};;;0`)
  }

  if (completed?.durationMs != null) perf.push(`duration=${(completed.durationMs / 1000).toFixed(3)}s;;;0`)
  // A plugin's text may not contain `|`: it starts the perfdata.
  const text = summary.replaceAll('|', '/').replaceAll('\n', ' ')
  return {status, exitCode: CHECK_CODES[status], line: `LOCALPUPPET ${status} - ${text} | ${perf.join(' ')}`, ageSeconds}
}
