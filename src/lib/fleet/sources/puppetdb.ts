import {FleetUnavailableError} from '../../errors.js'
import {type PuppetDbConfig, PuppetDbClient} from '../../puppetdb/client.js'
import {type ReleaseRef, parseReleaseRef} from '../../release/release-ref.js'
import {terminalText, terminalUrl} from '../../util/terminal-text.js'
import type {WantedIndex} from '../../source/wanted-now.js'
import type {FleetStatus, WantedFrom} from '../fleet-rows.js'
import {type PromFleet, type PromNode, fleetStatusOf} from './prometheus.js'

/*
 * The fleet as PuppetDB sees it: the nodes' reports (what each attempt did, with the release
 * as code_id) and their localpuppet fact (what the input asked for). It gives the same rows
 * as the node metrics in Prometheus (PromNode), so that fleet status and promote's gate judge
 * both sources by one set of rules.
 */

export interface PuppetDbFleetOptions {
  /** How far back reports are read (ms, default 1 day): healthy-since and applied come from them. */
  lookbackMs?: number
  /** Each PuppetDB answer whole (ms). */
  deadlineMs?: number
  timeoutMs?: number
  /** For tests: now. */
  now?: number
}

/** The statuses PuppetDB gives a report. */
const REPORT_STATUSES = new Set(['changed', 'unchanged', 'failed'])

/** The most characters of Puppet's first error kept per node. */
const MAX_ERROR_CHARS = 1000
/** The longest run id (a report's job_id) kept, as of a node's metrics. */
const MAX_RUN_ID_CHARS = 64

interface Report {
  status: string
  release: string | null
  noop: boolean
  /** The run id localpuppet gave it (job_id), or null. */
  runId: string | null
  start: number
  end: number
}

const isoOf = (ms: number | null | undefined) => (ms === null || ms === undefined || !Number.isFinite(ms) ? null : new Date(ms).toISOString())

/** The release of a code_id localpuppet wrote (`foo/tags/1.6.0@sha256:...`), or null for another's. */
export function releaseOfCodeId(codeId: unknown): string | null {
  if (typeof codeId !== 'string') return null
  const release = codeId.split('@')[0]
  // localpuppet's are APP/tags/TAG (or a branch, a channel): a server's code id is no release.
  if (!release.includes('/')) return null
  try {
    parseReleaseRef(release)
    return release
  } catch {
    return null
  }
}

function refOf(ref: unknown): ReleaseRef | null {
  if (typeof ref !== 'string') return null
  try {
    return parseReleaseRef(ref)
  } catch {
    return null
  }
}

/**
 * Reads the fleet from PuppetDB: four PQL queries (the reports within the lookback, the
 * latest failed reports' logs, the latest reports' metrics for drift, the localpuppet facts), each bounded by the client. Any row
 * whose fields are not what PuppetDB writes is refused (69), never guessed at.
 */
export async function readPuppetDbFleet(config: PuppetDbConfig, options: PuppetDbFleetOptions = {}): Promise<PromFleet> {
  const client = new PuppetDbClient(config, {deadlineMs: options.deadlineMs, timeoutMs: options.timeoutMs})
  const now = options.now ?? Date.now()
  const since = new Date(now - (options.lookbackMs ?? 86_400_000)).toISOString()
  const refuse = (query: string, why: string) => new FleetUnavailableError(`puppetdb ${terminalUrl(client.url)}: ${query}: ${why}`)
  const reportsQuery = `reports[certname, code_id, job_id, status, noop, start_time, end_time] { producer_timestamp > "${since}" }`
  const failedQuery = 'reports[certname, logs] { latest_report? = true and status = "failed" }'
  const factsQuery = 'facts[certname, value] { name = "localpuppet" }'
  // Drift as Prometheus has it: the corrective changes of the newest report, unless it was a noop run.
  const driftQuery = 'reports[certname, metrics] { latest_report? = true and noop = false }'
  // The failed reports' logs are the one answer that grows with how much failed (every line of each run): too large, they cost the first errors, not the fleet's status.
  let logsUnread: string | null = null
  const failedLogs = client.query(failedQuery).catch((error: Error & {kind?: string}) => {
    if (error.kind !== 'size') throw error
    logsUnread = `Puppet's first error not read: ${error.message}`
    return []
  })
  // Each node's metrics are some 30 numbers: a fleet too large for one answer loses its drift (shown unknown), not its status.
  const metricRows = client.query(driftQuery).catch((error: Error & {kind?: string}) => {
    if (error.kind !== 'size') throw error
    return []
  })
  const [reportRows, failedRows, factRows, driftRows] = await Promise.all([client.query(reportsQuery), failedLogs, client.query(factsQuery), metricRows])

  const reports = new Map<string, Report[]>()
  for (const row of reportRows) {
    // PuppetDB writes times as ISO text and only these statuses: anything else (a status 'ok', a time 0) would be judged a success.
    const start = typeof row.start_time === 'string' ? Date.parse(row.start_time) : Number.NaN
    const end = typeof row.end_time === 'string' ? Date.parse(row.end_time) : Number.NaN
    if (typeof row.certname !== 'string' || !REPORT_STATUSES.has(String(row.status)) || !Number.isFinite(start) || !Number.isFinite(end)) throw refuse('reports', `a row that is not a report: ${JSON.stringify(row).slice(0, 200)}`)
    const list = reports.get(row.certname) ?? []
    const runId = typeof row.job_id === 'string' && row.job_id !== '' ? row.job_id.slice(0, MAX_RUN_ID_CHARS) : null
    list.push({status: row.status as string, release: releaseOfCodeId(row.code_id), noop: row.noop === true, runId, start, end})
    reports.set(row.certname, list)
  }

  const firstErrors = new Map<string, string>()
  for (const row of failedRows) {
    const logs = (row.logs as {data?: unknown} | undefined)?.data
    if (typeof row.certname !== 'string' || !Array.isArray(logs)) continue
    const error = logs.find((log) => (log as {level?: unknown}).level === 'err') as {message?: unknown} | undefined
    if (typeof error?.message === 'string') firstErrors.set(row.certname, error.message.slice(0, MAX_ERROR_CHARS))
  }

  const drift = new Map<string, number>()
  for (const row of driftRows) {
    const metrics = (row.metrics as {data?: unknown} | undefined)?.data
    if (typeof row.certname !== 'string' || !Array.isArray(metrics)) continue
    const corrective = metrics.find((metric) => (metric as {category?: unknown}).category === 'resources' && (metric as {name?: unknown}).name === 'corrective_change') as {value?: unknown} | undefined
    if (corrective === undefined) continue
    if (!Number.isSafeInteger(corrective.value) || (corrective.value as number) < 0) throw refuse('reports', `${terminalText(row.certname, 200)}: a corrective_change that is not a count of resources: ${JSON.stringify(corrective.value)?.slice(0, 50)}`)
    drift.set(row.certname, corrective.value as number)
  }

  const facts = new Map<string, Record<string, unknown>>()
  for (const row of factRows) {
    if (typeof row.certname === 'string' && row.value !== null && typeof row.value === 'object') facts.set(row.certname, row.value as Record<string, unknown>)
  }

  const names = [...new Set([...reports.keys(), ...facts.keys()])].sort()
  const nodes = names.map((name) => nodeOf(name, reports.get(name) ?? [], facts.get(name), firstErrors.get(name) ?? logsUnread, drift.get(name) ?? null))
  return {nodes, at: now, url: client.url}
}

function nodeOf(name: string, reports: Report[], fact: Record<string, unknown> | undefined, firstError: string | null, drift: number | null): PromNode {
  // Newest first, by when each run started.
  reports.sort((a, b) => b.start - a.start)
  const newest = reports[0]
  const succeeded = (report: Report) => report.status !== 'failed' && !report.noop
  const lastSuccess = reports.find((report) => succeeded(report))
  const applied = lastSuccess?.release ?? null
  // Healthy since: the oldest run of the newest unbroken series of successes on the applied release.
  let healthySince: number | null = null
  for (const report of reports) {
    // A noop run applied nothing: it neither starts nor breaks the series.
    if (report.noop) continue
    if (report.status === 'failed' || report.release !== applied) break
    if (succeeded(report)) healthySince = report.end
  }

  const ref = typeof fact?.ref === 'string' ? fact.ref : null
  const parsed = refOf(ref)
  const desired = typeof fact?.release === 'string' ? fact.release : null
  const failed = newest?.status === 'failed'
  return {
    node: name,
    instance: name,
    job: 'puppetdb',
    app: parsed?.app ?? (desired ? (refOf(desired)?.app ?? null) : null),
    channel: parsed?.kind === 'channel' ? parsed.channel : null,
    wanted: ref,
    desired,
    applied,
    state: newest === undefined ? 'no runs' : failed ? 'failed' : 'succeeded',
    release: newest?.release ?? null,
    at: isoOf(newest?.start),
    noop: newest?.noop ?? false,
    drift,
    disabled: null,
    message: failed ? firstError : null,
    onWanted: desired ? applied === desired : null,
    lastSuccessAt: isoOf(lastSuccess?.end),
    healthySince: isoOf(healthySince),
    lastRunSuccess: newest === undefined ? null : !failed,
    exitCode: null,
    runId: newest?.runId ?? null,
    stopped: false,
  }
}

/** fleet status --puppetdb: the same rows and counts as the other sources, from PuppetDB's reports and facts. */
export async function fleetStatusViaPuppetDb(config: PuppetDbConfig, options: PuppetDbFleetOptions & {channel?: string; wanted?: WantedIndex | null} = {}): Promise<FleetStatus & {at: string; wantedFrom: WantedFrom}> {
  const fleet = await readPuppetDbFleet(config, options)
  return fleetStatusOf(fleet, options, `PuppetDB ${fleet.url} (every node with a report in the last ${Math.round((options.lookbackMs ?? 86_400_000) / 3_600_000)}h)`, "check that the nodes' Puppet reports reach PuppetDB")
}
