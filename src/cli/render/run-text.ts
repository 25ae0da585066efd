import type {RunRecord} from '../../lib/state/run-record.js'
import {colorState, formatDuration, formatLanguageMode, formatPuppet, formatResources, table} from './format.js'

/** What `status` adds about the node around the run it shows. */
export interface NodeContext {
  lastCompleted: RunRecord | null
  puppetDisabled: {message: string} | null
  pointer: string | null
  pointerFile: string
  applied?: {release: string | null; runId: string} | null
}

/** `localpuppet status`: one run, in full (and, with no run id, what else the node's operator must know). */
export function renderRunRecord(record: RunRecord, node?: NodeContext): string {
  const rows: Array<[string, string | string[]]> = [
    ['run', record.id],
    ['state', colorState(record.state)],
    ['release', record.release === null ? `- (not resolved${record.ref ? `: ${record.ref}` : ''})` : `${record.release}${record.ref === record.release ? '' : `  (from ${record.ref})`}`],
    ['started', record.startedAt],
    ['finished', record.finishedAt ?? '-'],
    ['duration', formatDuration(record.durationMs)],
    ['exit code', `${record.exitCode ?? '-'}${record.puppetExitCode === null ? '' : `  (puppet ${record.puppetExitCode})`}`],
    ['resources', formatResources(record)],
  ]
  if (record.puppet) rows.push(['puppet', formatPuppet(record.puppet)])
  if (record.languageMode) rows.push(['language', formatLanguageMode(record.languageMode)])
  if (record.noop) rows.push(['noop', 'yes'])
  if (record.allowMutable) rows.push(['mutable', record.mutableEntries.length > 0 ? record.mutableEntries.join(', ') : 'allowed, none used'])
  if (record.splaySeconds !== null && record.splaySeconds !== undefined) rows.push(['splay', `${record.splaySeconds}s`])
  if (record.reason) rows.push(['reason', record.reason])
  if (record.replayOf) rows.push(['replay of', record.replayOf])
  if (record.saved) rows.push(['saved', `${record.saved} now names ${record.release}`])
  if (record.fetch?.fallback) rows.push(['fetch', `failed, ran the installed release: ${record.fetch.source}: ${record.fetch.error ?? 'unreachable'}`])
  if (record.error) rows.push(['error', record.error])
  if (record.firstError && record.firstError !== record.error) rows.push(['puppet said', record.firstError])
  rows.push(['log', record.log])
  if (node) {
    if (node.lastCompleted) {
      const last = node.lastCompleted
      rows.push(['last completed', `${last.id}: ${colorState(last.state)} ${last.release}, finished ${last.finishedAt ?? '-'}`])
    } else if (record.state === 'refused' || record.state === 'running') {
      rows.push(['last completed', 'none'])
    }

    if (node.applied !== undefined) rows.push(['applied', node.applied ? `${node.applied.release}  (run ${node.applied.runId}, the newest succeeded without --noop)` : 'none (no run has succeeded without --noop)'])
    if (node.puppetDisabled) rows.push(['puppet', colorState('disabled') + `: ${node.puppetDisabled.message}`])
    rows.push(['input app', node.pointer === null ? `- (${node.pointerFile} unreadable)` : `${node.pointer}  (${node.pointerFile})`])
  }

  return table(rows)
}

/** The one line an operator reads after `apply`: did it work. */
export function renderRunOutcome(record: RunRecord): string {
  const r = record.resources
  const counts = r ? (record.noop ? `, ${r.outOfSync} would change (noop), ${r.failed} failed` : `, ${r.changed} changed, ${r.failed} failed`) : ''
  const error = record.error ? `: ${record.error}` : record.reason ? `: ${record.reason}` : ''
  return `localpuppet: ${colorState(record.state)} ${record.release}${counts} in ${formatDuration(record.durationMs)} (run ${record.id})${error}`
}

/** `localpuppet history`: one line per run, newest first. */
export function renderHistory(records: RunRecord[]): string {
  const rows = records.map((r) => [
    r.id,
    r.state,
    r.release ?? '-',
    (r.startedAt ?? '-').replace('T', ' ').replace(/\.\d+Z$/, 'Z'),
    formatDuration(r.durationMs ?? null),
    r.resources ? String(r.noop ? r.resources.outOfSync : r.resources.changed) : '-',
    r.resources ? String(r.resources.failed) : '-',
  ])
  const header = ['RUN', 'STATE', 'RELEASE', 'STARTED', 'DURATION', 'CHANGED', 'FAILED']
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i].length)))
  const line = (cells: string[], color = false) =>
    cells.map((cell, i) => (color && i === 1 ? colorState(cell) + ' '.repeat(widths[i] - cell.length) : cell.padEnd(widths[i]))).join('  ').trimEnd()
  return [line(header), ...rows.map((row) => line(row, true))].join('\n')
}
