import {PrometheusClient, type PromSample, promRegexLiteral} from '../prometheus/client.js'
import {type FleetRow, type FleetStatus, type WantedFrom, summarizeFleet} from './fleet-rows.js'
import {type WantedIndex, resolveInIndex} from './wanted-now.js'

/** What the node metrics say of one node (its series, by job and instance), at Prometheus' evaluation time. */
export interface PromNode extends FleetRow {
  /** The scrape target the series came from (`host:9100`). */
  instance: string
  job: string
  app: string | null
  /** The channel its input names, or null. */
  channel: string | null
  desired: string | null
  /** With the index (--source): the tag the node's own newest run resolved its app to, which `desired` replaces. */
  lastResolved?: string | null
  lastSuccessAt: string | null
  /** Since when its runs have all succeeded on the applied release. */
  healthySince: string | null
  /** Whether the newest completed run succeeded (null: none). */
  lastRunSuccess: boolean | null
  /** The newest finished attempt's exit code. */
  exitCode: number | null
  /** Its series are gone from Prometheus (the exporter down, or no longer scraped), though seen within the lookback. */
  stopped: boolean
}

export interface PromFleet {
  nodes: PromNode[]
  /** Prometheus' evaluation time (ms): ages are measured from its clock. */
  at: number
  url: string
}

/** The node metrics a fleet view reads; one instant query for all of them. */
const NAMES = [
  'desired_release_info',
  'applied_release_info',
  'healthy_since_timestamp_seconds',
  'last_run_success',
  'last_success_timestamp_seconds',
  'last_attempt_timestamp_seconds',
  'last_attempt_exit_code',
  'puppet_disabled',
  'release_info',
  'last_run_resources',
  'run_in_progress',
]

export interface PromFleetOptions {
  /** How far back a node that stopped reporting is still listed (ms, default 1 day). */
  lookbackMs?: number
  timeoutMs?: number
  /** Only the nodes whose input follows this channel. */
  channel?: string
  /** The repository's signed index now (fleet status --source): wanted releases resolve through it, not as each node last resolved them. */
  wanted?: WantedIndex | null
}

/** The three instant queries of a fleet view: every current node series, the nodes seen within the lookback, their last attempt. */
export function fleetQueries(lookbackSeconds: number): [string, string, string] {
  return [
    `{__name__=~"localpuppet_(${NAMES.join('|')})"}`,
    `last_over_time(localpuppet_desired_release_info[${lookbackSeconds}s])`,
    `last_over_time(localpuppet_last_attempt_timestamp_seconds[${lookbackSeconds}s])`,
  ]
}

/** A scrape target: a node's series share its job and instance. */
const targetKey = (labels: Record<string, string>) => `${labels.job ?? ''}\u0000${labels.instance ?? ''}`

/**
 * The fleet as the node exporters' Prometheus sees it: one query for every current series
 * of the node metrics, one for the nodes seen within the lookback (so a node whose
 * exporter went quiet is listed as stopped, never left out), one for their last attempt;
 * and only when a stopped node reported more than one label set, one for the newest.
 */
export async function readPromFleet(url: string, options: PromFleetOptions = {}): Promise<PromFleet> {
  const client = new PrometheusClient(url, {timeoutMs: options.timeoutMs})
  const lookbackSeconds = Math.max(60, Math.round((options.lookbackMs ?? 86_400_000) / 1000))
  const [current, seen, lastAttempts] = await Promise.all(fleetQueries(lookbackSeconds).map((query) => client.query(query)))
  const at = current[0]?.at ?? seen[0]?.at ?? Date.now()
  const byTarget = new Map<string, PromSample[]>()
  for (const sample of current) byTarget.set(targetKey(sample.labels), [...(byTarget.get(targetKey(sample.labels)) ?? []), sample])
  const nodes: PromNode[] = []
  const seenTargets = new Set<string>()
  for (const [target, samples] of byTarget) {
    if (!samples.some((s) => s.labels.__name__ === 'localpuppet_desired_release_info' || s.labels.__name__ === 'localpuppet_last_attempt_timestamp_seconds')) continue
    nodes.push(nodeFrom(samples))
    seenTargets.add(target)
  }

  // A node that stopped reporting: the label set it reported last (its release or channel may have changed within the lookback).
  const stopped = new Map<string, Array<Record<string, string>>>()
  for (const sample of seen) {
    const target = targetKey(sample.labels)
    if (!seenTargets.has(target)) stopped.set(target, [...(stopped.get(target) ?? []), sample.labels])
  }

  const newest = await newestLabelSets(client, stopped, lookbackSeconds)
  for (const [target, labels] of stopped) {
    const last = lastAttempts.find((s) => targetKey(s.labels) === target)
    nodes.push(stoppedNode(newest.get(target) ?? labels[0], last?.value))
  }

  nodes.sort((a, b) => (a.node < b.node ? -1 : a.node > b.node ? 1 : 0))
  return {nodes, at, url}
}

/**
 * For each stopped target that reported more than one label set of the desired-release
 * info within the lookback, the one scraped last: one query of the raw samples of just
 * those targets (their own timestamps; last_over_time answers at the evaluation time).
 */
async function newestLabelSets(client: PrometheusClient, stopped: Map<string, Array<Record<string, string>>>, lookbackSeconds: number): Promise<Map<string, Record<string, string>>> {
  const ambiguous = [...stopped.values()].filter((sets) => sets.length > 1)
  const newest = new Map<string, Record<string, string>>()
  if (ambiguous.length === 0) return newest
  const instances = [...new Set(ambiguous.map((sets) => sets[0].instance ?? ''))]
  const series = await client.lastSeen(`localpuppet_desired_release_info{instance=~${promRegexLiteral(instances)}}`, lookbackSeconds)
  const best = new Map<string, number>()
  for (const {labels, at} of series) {
    const target = targetKey(labels)
    if (!stopped.has(target) || !(at > (best.get(target) ?? Number.NEGATIVE_INFINITY))) continue
    best.set(target, at)
    newest.set(target, labels)
  }

  return newest
}

const iso = (seconds: number | undefined) => (seconds === undefined || !Number.isFinite(seconds) ? null : new Date(seconds * 1000).toISOString())

function nodeFrom(samples: PromSample[]): PromNode {
  const one = (name: string) => samples.find((s) => s.labels.__name__ === `localpuppet_${name}`)
  const desired = one('desired_release_info')?.labels
  const applied = one('applied_release_info')?.labels.release ?? null
  const exit = one('last_attempt_exit_code')
  const running = one('run_in_progress')?.value === 1
  const disabled = one('puppet_disabled')
  const success = one('last_run_success')
  const corrective = samples.find((s) => s.labels.__name__ === 'localpuppet_last_run_resources' && s.labels.kind === 'corrective_change')
  const labels = samples[0].labels
  const resolved = desired?.release || null
  const ref = desired?.ref || null
  return {
    node: desired?.node || labels.instance || '?',
    instance: labels.instance ?? '',
    job: labels.job ?? '',
    app: desired?.app || null,
    channel: desired?.channel || null,
    wanted: ref,
    desired: resolved,
    applied,
    state: running ? 'running' : (exit?.labels.state ?? 'no runs'),
    // The newest attempt's release (a refused one's too); metrics from before that label: the newest completed run's.
    release: exit && 'release' in exit.labels ? exit.labels.release || null : (one('release_info')?.labels.release ?? null),
    at: iso(one('last_attempt_timestamp_seconds')?.value),
    noop: false,
    drift: corrective ? corrective.value : null,
    disabled: disabled?.value === 1 ? disabled.labels.message || '(no message)' : null,
    message: null,
    onWanted: resolved ? applied === resolved : null,
    lastSuccessAt: iso(one('last_success_timestamp_seconds')?.value),
    healthySince: iso(one('healthy_since_timestamp_seconds')?.value),
    lastRunSuccess: success ? success.value === 1 : null,
    exitCode: exit ? exit.value : null,
    stopped: false,
  }
}

function stoppedNode(labels: Record<string, string>, lastAttempt: number | undefined): PromNode {
  return {
    node: labels.node || labels.instance || '?',
    instance: labels.instance ?? '',
    job: labels.job ?? '',
    app: labels.app || null,
    channel: labels.channel || null,
    wanted: labels.ref || null,
    desired: labels.release || null,
    applied: null,
    state: 'stopped reporting',
    release: null,
    at: iso(lastAttempt),
    noop: false,
    drift: null,
    disabled: null,
    message: null,
    onWanted: null,
    lastSuccessAt: null,
    healthySince: null,
    lastRunSuccess: null,
    exitCode: null,
    stopped: true,
  }
}

/**
 * A node's row with its wanted release as the index names it now: a node that applied
 * another tag than its channel names now is not on its wanted release, whatever its last
 * run resolved (the channel may have moved since). Trunk and branches keep the node's own.
 */
export function wantedThroughIndex(node: PromNode, index: WantedIndex['index']): PromNode {
  if (node.wanted === null) return node
  const {release, why} = resolveInIndex(node.wanted, index)
  if (release === null && why === null) return node
  return {
    ...node,
    desired: release,
    lastResolved: node.desired,
    onWanted: node.stopped ? null : release !== null && node.applied === release,
    message: why ?? node.message,
  }
}

/** fleet status --prometheus: the same rows and counts as the MCollective view, from the nodes' metrics. */
export async function fleetStatusViaPrometheus(url: string, options: PromFleetOptions = {}): Promise<FleetStatus & {at: string; wantedFrom: WantedFrom}> {
  const fleet = await readPromFleet(url, options)
  const {wanted} = options
  const following = options.channel === undefined ? fleet.nodes : fleet.nodes.filter((node) => node.channel === options.channel)
  const nodes = wanted ? following.map((node) => wantedThroughIndex(node, wanted.index)) : following
  const wantedFrom: WantedFrom = wanted
    ? {from: 'index', source: wanted.source, version: wanted.version, signedBy: wanted.signedBy}
    : {from: 'last run', source: null, version: null, signedBy: null}
  return {
    ...summarizeFleet(nodes, `Prometheus ${url} (every node seen in the last ${Math.round((options.lookbackMs ?? 86_400_000) / 3_600_000)}h)`),
    at: new Date(fleet.at).toISOString(),
    wantedFrom,
  }
}
