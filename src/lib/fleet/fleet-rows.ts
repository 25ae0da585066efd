import type {NodeReport} from '../rollout/engine.js'

/**
 * Desired against applied, fleet-wide: per node what it should run (its input's app), what
 * it has applied (its newest run that succeeded without --noop: a noop or failed run never
 * counts), its newest attempt, drift and whether Puppet is disabled. Whatever the source
 * (MCollective today), the rows and counts are the same.
 */
export interface FleetRow {
  node: string
  /** Its input's app. */
  wanted: string | null
  applied: string | null
  /** The newest attempt's state, `no runs`, or `no answer`. */
  state: string
  /** The newest attempt's release. */
  release: string | null
  /** When the newest attempt started. */
  at: string | null
  /** The newest attempt's run id (null: not reported). */
  runId?: string | null
  noop: boolean
  drift: number | null
  disabled: string | null
  message: string | null
  /** From Prometheus: the tag its input's app (a channel) resolved to, and when its newest success ended. */
  desired?: string | null
  lastSuccessAt?: string | null
  /** From Prometheus: the other scrape targets that reported this node name, older: not counted. */
  alsoSeenAs?: string[]
  /** Whether what it has applied is what it should run (null when it did not answer). */
  onWanted: boolean | null
}

/** Where a fleet's wanted releases came from, as JSON gives it. */
export interface WantedFrom {
  /** index: the repository's signed index now; last run: each node's own resolution on its newest run. */
  from: 'index' | 'last run'
  source: string | null
  version: number | null
  signedBy: string | null
}

export interface FleetStatus {
  nodes: FleetRow[]
  byApplied: Record<string, number>
  byState: Record<string, number>
  disabled: number
  noAnswer: string[]
  /** Nodes whose applied release is not their wanted one (or that did not answer). */
  offWanted: string[]
  ok: boolean
  /** Where the node list came from. */
  expectedFrom: string
  /** From Prometheus: where the wanted releases came from. */
  wantedFrom?: WantedFrom
  /** From Prometheus or PuppetDB, when no node is listed: why (none seen, or none follows --channel). */
  noNodes?: string
}

/** An exact release is compared as it is; a range or a branch is met by any release the node applied from it. */
function meets(applied: string | null, wanted: string | null): boolean {
  if (applied === null || wanted === null) return false
  if (/\/tags\/[^/]+$/.test(wanted)) return applied.replace(/^app\//, '') === wanted.replace(/^app\//, '')
  const app = wanted.replace(/^app\//, '').split(/[/@]/)[0]
  return applied.replace(/^app\//, '').split('/')[0] === app
}

export function fleetRow(node: string, report: NodeReport | undefined): FleetRow {
  if (!report) return {node, wanted: null, applied: null, state: 'no answer', release: null, at: null, noop: false, drift: null, disabled: null, message: null, onWanted: null}
  const newest = report.newest
  return {
    node,
    wanted: report.pointer,
    applied: report.applied,
    state: newest?.state ?? 'no runs',
    release: newest?.release ?? null,
    at: newest?.startedAt ?? null,
    runId: newest?.runId ?? null,
    noop: newest?.noop === true,
    drift: report.drift ?? null,
    disabled: report.disabled ?? null,
    message: newest && !['succeeded', 'skipped', 'running'].includes(newest.state) ? (newest.message ?? null) : null,
    onWanted: meets(report.applied, report.pointer),
  }
}

export function summarizeFleet(rows: FleetRow[], expectedFrom: string): FleetStatus {
  const count = (values: string[]) => {
    const counts: Record<string, number> = {}
    for (const value of values) counts[value] = (counts[value] ?? 0) + 1
    return counts
  }

  const silent = (row: FleetRow) => row.state === 'no answer' || row.state === 'stopped reporting'
  const answered = rows.filter((row) => !silent(row))
  const offWanted = rows.filter((row) => row.onWanted !== true).map((row) => row.node)
  return {
    nodes: rows,
    byApplied: count(answered.map((row) => row.applied ?? '(none)')),
    byState: count(answered.map((row) => row.state)),
    disabled: answered.filter((row) => row.disabled !== null).length,
    noAnswer: rows.filter((row) => silent(row)).map((row) => row.node),
    offWanted,
    ok: rows.length > 0 && offWanted.length === 0,
    expectedFrom,
  }
}
