import chalk from 'chalk'

import type {FleetRow, FleetStatus} from '../../lib/fleet/fleet-rows.js'
import type {RolloutEngine, RolloutNode} from '../../lib/rollout/engine.js'
import type {RolloutRecord} from '../../lib/rollout/record.js'
import type {RevertResult} from '../../lib/rollout/revert.js'
import {appliedByNode} from '../../lib/rollout/record-view.js'
import {formatStep} from '../../lib/rollout/settings.js'
import {formatAge} from '../../lib/util/duration.js'
import {terminalText, terminalUrl} from '../../lib/util/terminal-text.js'
import {formatDuration} from './format.js'

const OK_STATES = new Set(['succeeded', 'up to date'])

/** Columns padded to their widest cell; the last column is not padded. */
export function columns(headers: string[], rows: Array<Array<string | number | null | undefined>>): string {
  const cells = rows.map((row) => row.map((cell) => (cell === null || cell === undefined || cell === '' ? '-' : String(cell))))
  const widths = headers.map((header, i) => Math.max(header.length, ...cells.map((row) => row[i].length)))
  return [headers, ...cells].map((row) => row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i]))).join('  ').trimEnd()).join('\n')
}

const firstLine = (text: string | null): string => (text ?? '').split('\n')[0].trim()
/** Text from outside (a node, Puppet, mco, a record) as one safe line of a table or message. */
const shown = (text: string | null | undefined): string | null => (text === null || text === undefined ? null : terminalText(text))

/** What the rollout knows of one node, as --json gives it; `applied` as appliedByNode says. */
export function rolloutNodeJson(node: RolloutNode, applied: string | null) {
  return {
    node: node.node,
    before: node.before,
    wanted: node.wanted,
    applied,
    release: node.release,
    state: node.state,
    runId: node.runId,
    changed: node.resources?.changed ?? null,
    failed: node.resources?.failed ?? null,
    outOfSync: node.resources?.outOfSync ?? null,
    durationMs: node.durationMs,
    exitCode: node.exitCode,
    noop: node.noop,
    message: node.message,
    revert: node.revert ? {state: node.revert.state, release: node.revert.release, runId: node.revert.runId, saved: node.revert.save, message: node.revert.message} : null,
  }
}

/** `rollout --json` and `rollout show --json`. */
export function rolloutJson(record: RolloutRecord, path: string) {
  const {state} = record
  const applied = appliedByNode(record)
  const nodes = state.nodes.map((node) => rolloutNodeJson(node, applied.get(node.node) ?? null))
  const byState: Record<string, number> = {}
  for (const node of nodes) byState[node.state] = (byState[node.state] ?? 0) + 1
  return {
    id: record.id,
    ref: record.settings.ref,
    reverts: record.reverts ?? null,
    status: record.status,
    ok: record.exitCode === 0,
    exitCode: record.exitCode,
    stopped: state.stopped,
    interruption: record.interruption,
    startedAt: record.createdAt,
    elapsedSeconds: state.startedAt !== null ? Math.round(((state.finishedAt ?? Date.parse(record.updatedAt)) - state.startedAt) / 100) / 10 : null,
    expectedFrom: record.expectedFrom,
    settings: record.settings,
    nodes,
    summary: {total: nodes.length, byState, failures: nodes.filter((node) => ['failed', 'refused', 'deadline', 'no answer'].includes(node.state)).length, allowedFailures: state.allowedFailures},
    notSucceeded: nodes.filter((node) => !OK_STATES.has(node.state)).map((node) => node.node),
    reverted: nodes.filter((node) => node.revert).map((node) => node.node),
    record: path,
  }
}

function stateText(node: RolloutNode): string {
  const text = node.state === 'succeeded' ? chalk.green(node.state) : node.state === 'up to date' ? chalk.green.dim(node.state) : ['not started', 'busy'].includes(node.state) ? chalk.yellow(node.state) : node.state === 'running' || node.state === 'starting' ? chalk.cyan(node.state) : chalk.red(node.state)
  return text
}

function message(node: RolloutNode): string {
  const text = terminalText(firstLine(node.message))
  if (node.state === 'refused' || node.state === 'busy') return node.exitCode ? `exit ${node.exitCode}: ${text}` : text
  return text
}

/** The table, one line per node, then what happened to the rollout as a whole. */
export function renderRollout(record: RolloutRecord, path: string): string {
  const {state, settings} = record
  const json = rolloutJson(record, path)
  const anyRevert = state.nodes.some((node) => node.revert)
  const headers = ['NODE', 'BEFORE', 'WANTED', 'APPLIED', 'STATE', 'CHANGED', 'FAILED', 'OUT_OF_SYNC', 'DURATION', ...(anyRevert ? ['REVERT'] : []), 'MESSAGE']
  const rows = json.nodes.map((entry, i) => {
    const node = state.nodes[i]
    const revert = node.revert ? `${node.revert.state}${node.revert.release && ['succeeded', 'running', 'starting', 'pending'].includes(node.revert.state) ? ` to ${terminalText(node.revert.release)}` : ''}` : null
    return [
      shown(node.node),
      shown(node.before),
      shown(node.wanted),
      shown(entry.applied),
      stateText(node),
      entry.changed,
      entry.failed,
      entry.outOfSync,
      node.durationMs === null ? null : formatDuration(node.durationMs),
      ...(anyRevert ? [revert] : []),
      message(node) || (node.revert?.message ? terminalText(firstLine(node.revert.message)) : ''),
    ]
  })
  const counts = Object.entries(json.summary.byState).map(([name, n]) => `${n} ${name}`)
  const lines = [
    columns(headers, rows),
    '',
    `${json.nodes.length} node${json.nodes.length === 1 ? '' : 's'}${settings.ref ? ` ${record.reverts ? 'back ' : ''}to ${terminalText(settings.ref)}` : ' (each its own input)'}${record.reverts ? ` (putting back rollout ${terminalText(record.reverts)})` : ''}${settings.noop ? ' (noop)' : ''}: ${counts.join(', ')}${json.elapsedSeconds === null ? '' : ` (${json.elapsedSeconds} s)`}; failures ${json.summary.failures} of ${json.summary.allowedFailures} allowed (--max-failures ${formatStep(settings.maxFailures)})`,
  ]
  if (state.stopped) lines.push(`Stopped: ${terminalText(state.stopped)}`)
  const notOk = state.nodes.filter((node) => !OK_STATES.has(node.state))
  if (notOk.length > 0) lines.push(`Not succeeded: ${notOk.map((node) => `${terminalText(node.node)} (${node.state})`).join(', ')}`)
  const reverted = state.nodes.filter((node) => node.revert)
  if (reverted.length > 0) lines.push(`Reverted: ${reverted.map((node) => `${terminalText(node.node)} ${node.revert!.state}${node.revert!.release ? ` (${terminalText(node.revert!.release)})` : ''}`).join(', ')}`)
  if (record.status === 'interrupted') {
    const going = state.nodes.filter((node) => node.state === 'running' || node.state === 'starting' || node.revert?.state === 'running')
    lines.push(
      `Interrupted${record.interruption ? ` (${terminalText(record.interruption)})` : ''}: ${going.length === 0 ? 'no run is going on' : `runs still going: ${going.map((node) => `${terminalText(node.node)} (${node.revert?.state === 'running' ? `revert run ${terminalText(node.revert.runId)}` : `run ${terminalText(node.runId ?? 'starting')}`})`).join(', ')}`}`,
      `Resume it: localpuppet rollout --resume ${record.id}`,
    )
  }

  lines.push(`Record: ${path}`)
  return lines.join('\n')
}

/** One line, rewritten in place on a terminal while the rollout runs. */
export function progressLine(engine: RolloutEngine): string {
  const count = (states: string[]) => engine.state.nodes.filter((node) => states.includes(node.state)).length
  const reverted = engine.state.nodes.filter((node) => node.revert?.state === 'succeeded').length
  const group = engine.state.groups.findIndex((_, g) => engine.state.settledAt[g] === null || !engine.state.rechecked[g])
  const label =
    engine.state.phase === 'reverting' ? 'reverting' : engine.state.phase === 'survey' ? 'asking the fleet' : group === -1 ? 'finishing' : engine.settings.canary > 0 && group === 0 ? 'canaries' : `group ${group + (engine.settings.canary > 0 ? 0 : 1)} of ${engine.state.groups.length - (engine.settings.canary > 0 ? 1 : 0)}`
  const left = Math.max(0, engine.state.allowedFailures - engine.failures())
  return `${label}: ${count(['succeeded', 'up to date'])} done, ${count(['running', 'starting'])} running, ${count(['failed', 'refused', 'deadline'])} failed, ${reverted} reverted, ${count(['no answer'])} no answer, ${count(['busy'])} busy; budget left ${left}`
}

/** `rollout list`: one line per rollout, newest first, then how to resume those interrupted. */
export function renderRolloutList(records: RolloutRecord[]): string {
  const interrupted = records.filter((record) => record.status === 'interrupted')
  const table = columns(
    ['ROLLOUT', 'STATUS', 'REF', 'NODES', 'SUCCEEDED', 'NOT SUCCEEDED', 'STARTED', 'EXIT'],
    records.map((record) => {
      const ok = record.state.nodes.filter((node) => OK_STATES.has(node.state)).length
      return [terminalText(record.id), record.status, `${terminalText(record.settings.ref ?? '(each input)')}${record.reverts ? ' (revert)' : ''}`, record.state.nodes.length, ok, record.state.nodes.length - ok, terminalText(record.createdAt), record.exitCode]
    }),
  )
  return [table, ...interrupted.map((record) => `Interrupted${record.interruption ? ` (${terminalText(record.interruption)})` : ''}: localpuppet rollout --resume ${terminalText(record.id)} continues it`)].join('\n')
}

/** `fleet status`: one line per node, then counts. */
export function renderFleetStatus(status: FleetStatus, now = Date.now()): string {
  // From Prometheus: what a channel resolved to, and the age of the newest success.
  const extended = status.nodes.some((row) => row.lastSuccessAt !== undefined)
  const rows = status.nodes.map((row) => {
    const {desired, lastSuccessAt} = row
    const wanted = desired && row.wanted && !row.wanted.endsWith(`/tags/${desired.split('/').pop()}`) ? `${row.wanted} (${desired.split('/').pop()})` : row.wanted
    // Every value here is what a node (or its metrics) said: shown escaped, one line each.
    return [
      terminalText(row.node),
      terminalText(wanted),
      terminalText(row.applied),
      row.onWanted === false ? chalk.red('no') : row.onWanted ? 'yes' : null,
      row.state === 'succeeded' ? chalk.green(row.state) : ['no answer', 'stopped reporting', 'failed', 'error', 'refused', 'interrupted'].includes(row.state) ? chalk.red(row.state) : terminalText(row.state),
      terminalText(row.release),
      row.at ? formatAge(now - Date.parse(row.at)) : null,
      ...(extended ? [lastSuccessAt ? formatAge(now - Date.parse(lastSuccessAt)) : null] : []),
      row.drift,
      terminalText([row.noop ? 'noop' : '', row.disabled ? `disabled: ${row.disabled}` : '', failedRun(row), row.alsoSeenAs ? `also seen as ${row.alsoSeenAs.join(', ')} (older: ignored)` : ''].filter(Boolean).join('; ')),
    ]
  })
  const by = (counts: Record<string, number>) =>
    Object.entries(counts)
      .sort()
      .map(([name, n]) => `${terminalText(name)} = ${n}`)
      .join(', ')
  const headers = ['NODE', 'WANTED', 'APPLIED', 'ON_WANTED', 'NEWEST', 'RELEASE', 'AGE', ...(extended ? ['SUCCESS_AGE'] : []), 'DRIFT', 'NOTE']
  const lines = [columns(headers, rows), '']
  if (Object.keys(status.byApplied).length > 0) lines.push(`By applied release: ${by(status.byApplied)}`, `By state (newest attempt): ${by(status.byState)}`)
  if (status.disabled > 0) lines.push(`Puppet disabled: ${status.disabled}`)
  const names = (nodes: string[]) => nodes.map((node) => terminalText(node)).join(', ')
  if (status.noAnswer.length > 0) lines.push(`${extended ? 'Stopped reporting' : 'No answer'}: ${names(status.noAnswer)}`)
  const off = status.offWanted.filter((node) => !status.noAnswer.includes(node))
  if (off.length > 0) lines.push(`Not on their wanted release: ${names(off)}`)
  if (status.noNodes) lines.push(`No node listed: ${terminalText(status.noNodes)}`)
  lines.push(`Nodes: ${terminalText(status.expectedFrom)}`)
  const from = status.wantedFrom
  if (from?.from === 'index') lines.push(`Wanted: as the signed index of ${terminalUrl(from.source ?? '')} names it now (version ${from.version ?? 'none'}${from.signedBy ? `, signed by ${from.signedBy}` : ', unsigned'})`)
  else if (from) lines.push("Wanted: as each node resolved it on its last run (a channel moved since is not seen until the node runs again; --source URL|DIR reads the repository's index now)")
  return lines.join('\n')
}

/** A row's message (Puppet's first error, for a failed attempt), with the run it is of: what to look up on the node. */
function failedRun(row: FleetRow): string {
  const message = firstLine(row.message)
  return message && row.runId ? `run ${row.runId}: ${message}` : message
}

/** `rollout revert --json`: the rollouts that put nodes back, and the nodes that could not be. */
export function revertJson(result: RevertResult, dir: string) {
  return {
    reverts: result.reverts,
    ok: result.exitCode === 0,
    exitCode: result.exitCode,
    groups: result.plan.groups,
    skipped: result.plan.skipped,
    rollouts: result.rollouts.map(({record}) => rolloutJson(record, `${dir}/${record.id}.json`)),
  }
}

/** `rollout revert`: each rollout's table, then what could not be put back. */
export function renderRevert(result: RevertResult, dir: string): string {
  const {plan} = result
  const lines = result.rollouts.map(({record}) => renderRollout(record, `${dir}/${record.id}.json`))
  if (plan.groups.length === 0) lines.push(`rollout ${terminalText(result.reverts)} moved no node: nothing to put back`)
  const notRun = plan.groups.slice(result.rollouts.length)
  if (notRun.length > 0) lines.push(`Not put back (a revert before did not entirely succeed): ${notRun.map((group) => `${group.nodes.map((node) => terminalText(node)).join(', ')} (to ${terminalText(group.release)})`).join('; ')}`)
  for (const {node, why} of plan.skipped) lines.push(`Not put back: ${terminalText(node)}: ${terminalText(why)}`)
  return lines.join('\n\n')
}
