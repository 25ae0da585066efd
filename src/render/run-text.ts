import type {RunRecord} from '../lib/state/run-record.js'
import {colorState, formatDuration, formatResources, table} from './format.js'

/** `localpuppet status`: one run, in full. */
export function renderRunRecord(record: RunRecord): string {
  const rows: Array<[string, string | string[]]> = [
    ['run', record.id],
    ['state', colorState(record.state)],
    ['release', `${record.release}${record.ref === record.release ? '' : `  (from ${record.ref})`}`],
    ['started', record.startedAt],
    ['finished', record.finishedAt ?? '-'],
    ['duration', formatDuration(record.durationMs)],
    ['exit code', `${record.exitCode ?? '-'}${record.puppetExitCode === null ? '' : `  (puppet ${record.puppetExitCode})`}`],
    ['resources', formatResources(record)],
  ]
  if (record.noop) rows.push(['noop', 'yes'])
  if (record.allowMutable) rows.push(['mutable', record.mutableEntries.length > 0 ? record.mutableEntries.join(', ') : 'allowed, none used'])
  if (record.error) rows.push(['error', record.error])
  rows.push(['log', record.log])
  return table(rows)
}

/** The one line an operator reads after `apply`: did it work. */
export function renderRunOutcome(record: RunRecord): string {
  const counts = record.resources ? `, ${record.resources.changed} changed, ${record.resources.failed} failed` : ''
  const error = record.error ? `: ${record.error}` : ''
  return `localpuppet: ${colorState(record.state)} ${record.release}${counts} in ${formatDuration(record.durationMs)} (run ${record.id})${error}`
}
