import type {RunRecord} from '../../lib/state/run-record.js'
import {terminalText, terminalUrl} from '../../lib/util/terminal-text.js'
import {shownMessage} from './message-text.js'
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
  // A record's values came from an input, Puppet, a server or a lock file: each shown on its
  // row; what Puppet or a server said as a message is (URLs without their credentials).
  const t = terminalText
  const rows: Array<[string, string | string[]]> = [
    ['run', t(record.id)],
    ['state', colorState(t(record.state))],
    ['release', record.release === null ? `- (not resolved${record.ref ? `: ${t(record.ref)}` : ''})` : `${t(record.release)}${record.ref === record.release ? '' : `  (from ${t(record.ref)})`}`],
    ['started', t(record.startedAt)],
    ['finished', t(record.finishedAt ?? '-')],
    ['duration', formatDuration(record.durationMs)],
    ['exit code', `${t(record.exitCode ?? '-')}${record.puppetExitCode === null ? '' : `  (puppet ${t(record.puppetExitCode)})`}`],
    ['resources', t(formatResources(record))],
  ]
  if (record.corrected) rows.push(['drift', t(formatDrift(record))])
  if (record.puppet) rows.push(['puppet', t(formatPuppet(record.puppet))])
  if (record.languageMode) rows.push(['language', t(formatLanguageMode(record.languageMode))])
  if (record.noop) rows.push(['noop', 'yes'])
  if (record.allowMutable) rows.push(['mutable', record.mutableEntries.length > 0 ? record.mutableEntries.map(t).join(', ') : 'allowed, none used'])
  if (record.splaySeconds !== null && record.splaySeconds !== undefined) rows.push(['splay', `${t(record.splaySeconds)}s`])
  if (record.reason) rows.push(['reason', shownMessage(record.reason)])
  if (record.replayOf) rows.push(['replay of', t(record.replayOf)])
  if (record.saved) rows.push(['saved', `${t(record.saved)} now names ${t(String(record.release))}`])
  if (record.fetch?.fallback) rows.push(['fetch', `failed, ran the installed release: ${terminalUrl(record.fetch.source)}: ${shownMessage(record.fetch.error ?? 'unreachable')}`])
  if (record.error) rows.push(['error', shownMessage(record.error)])
  if (record.firstError && record.firstError !== record.error) rows.push(['puppet said', shownMessage(record.firstError)])
  rows.push(['log', t(record.log)])
  if (node) {
    if (node.lastCompleted) {
      const last = node.lastCompleted
      rows.push(['last completed', `${t(last.id)}: ${colorState(t(last.state))} ${t(String(last.release))}, finished ${t(last.finishedAt ?? '-')}`])
    } else if (record.state === 'refused' || record.state === 'running') {
      rows.push(['last completed', 'none'])
    }

    if (node.applied !== undefined) rows.push(['applied', node.applied ? `${t(String(node.applied.release))}  (run ${t(node.applied.runId)}, the newest succeeded without --noop)` : 'none (no run has succeeded without --noop)'])
    if (node.puppetDisabled) rows.push(['puppet', colorState('disabled') + `: ${shownMessage(node.puppetDisabled.message)}`])
    rows.push(['input app', node.pointer === null ? `- (${t(node.pointerFile)} unreadable)` : `${t(node.pointer)}  (${t(node.pointerFile)})`])
  }

  return table(rows)
}

/** What a run put back that had changed since the run before it with the same fingerprint (see drift/). */
function formatDrift(record: RunRecord): string {
  const {corrected, resources} = record
  const count = resources?.correctiveChange ?? corrected!.resources.length
  const more = count > corrected!.resources.length ? `, and ${count - corrected!.resources.length} more` : ''
  return `${count} resource(s) put back, changed outside Puppet since run ${corrected!.since}: ${corrected!.resources.join(', ')}${more}`
}

/** The one line an operator reads after `apply`: did it work. */
export function renderRunOutcome(record: RunRecord): string {
  const r = record.resources
  const drift = record.corrected && r?.correctiveChange ? ` (${r.correctiveChange} drift)` : ''
  const counts = r ? (record.noop ? `, ${r.outOfSync} would change (noop), ${r.failed} failed` : `, ${r.changed} changed${drift}, ${r.failed} failed`) : ''
  const error = record.error ? `: ${shownMessage(record.error)}` : record.reason ? `: ${shownMessage(record.reason)}` : ''
  return `localpuppet: ${colorState(terminalText(record.state))} ${terminalText(String(record.release))}${counts} in ${formatDuration(record.durationMs)} (run ${record.id})${error}`
}

/** `localpuppet history`: one line per run, newest first. */
export function renderHistory(records: RunRecord[]): string {
  const rows = records.map((r) => [
    terminalText(r.id),
    terminalText(r.state),
    terminalText(r.release ?? '-'),
    terminalText(r.startedAt ?? '-').replace('T', ' ').replace(/\.\d+Z$/, 'Z'),
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
