import {FleetUnavailableError} from '../../errors.js'
import {PrometheusClient, promRegexLiteral} from '../../prometheus/client.js'
import {type ReleaseRef, parseReleaseRef} from '../../release/release-ref.js'
import {redactUrl, terminalText, terminalUrl} from '../../util/terminal-text.js'
import {type FleetRow, type FleetStatus, type WantedFrom, summarizeFleet} from '../fleet-rows.js'
import {type WantedIndex, resolveInIndex} from '../../source/wanted-now.js'
import {type TargetNames, collision, freshestPerNode, noteName, twinsConflict} from '../node-identity.js'

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
  /** The newest finished attempt's run id and, when it failed, why (localpuppet_last_attempt_info; null: not reported). */
  runId?: string | null
  firstError?: string | null
  /** Its series are gone from Prometheus (the exporter down, or no longer scraped), though seen within the lookback. */
  stopped: boolean
  /** Two series of one metric said different things (`its metrics disagree: ...`): nothing it says is believed healthy. */
  conflict?: string
  /** Other scrape targets that reported this node name: older series, not counted (the freshest target is this one). */
  alsoSeenAs?: string[]
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
  'last_attempt_info',
]

/** How far back a node that stopped reporting is still listed, and counted by the promotion gate, unless told (--lookback). */
export const DEFAULT_LOOKBACK_MS = 86_400_000

export interface PromFleetOptions {
  /** How far back a node that stopped reporting is still listed (ms, default 1 day). */
  lookbackMs?: number
  timeoutMs?: number
  /** Each Prometheus answer whole, from connecting to its last byte (ms; --prometheus-timeout). */
  deadlineMs?: number
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
 * The most nodes (scrape targets) a fleet view keeps: twice the 100,000 the client's
 * series bound is built for. What is kept per node is its newest series of each node
 * metric (a dozen), so memory follows the nodes, never the answer; more is 69.
 */
export const MAX_NODES = 200_000

const TIMESTAMPS = new Set(['last_attempt_timestamp_seconds', 'last_success_timestamp_seconds', 'healthy_since_timestamp_seconds'])
const FLAGS = new Set(['last_run_success', 'puppet_disabled', 'run_in_progress'])
const KEPT = new Set(NAMES)
/** Of each node metric, the labels a fleet view reads (the rest is not kept: memory follows what is read). */
const TARGET = ['instance', 'job']
const DESIRED = [...TARGET, 'node', 'app', 'ref', 'channel', 'release']
const KEPT_LABELS: Record<string, string[]> = {
  desired_release_info: DESIRED,
  applied_release_info: ['release'],
  last_attempt_exit_code: ['state', 'release'],
  release_info: ['release'],
  puppet_disabled: ['message'],
  last_attempt_info: ['run_id', 'first_error'],
}

/**
 * The longest run id and first error line kept of a node's metrics: a node writes at most
 * 300 characters of its first error (see metrics/attempt-info.ts); anything longer is cut.
 */
const MAX_RUN_ID_CHARS = 64
const MAX_FIRST_ERROR_CHARS = 300
const cut = (text: string | undefined, max: number) => (text === undefined || text === '' ? null : text.length > max ? `${text.slice(0, max)}…` : text)

/** The newest attempt's states (as the metrics write them) that are a failure. */
export const FAILED_STATES: ReadonlySet<string> = new Set(['failed', 'error', 'refused', 'interrupted'])

/** A series as kept: its value and the labels read of it. */
interface Kept {
  value: number
  labels: Record<string, string>
}

/** The largest time Date can hold, in seconds. */
const MAX_SECONDS = 8.64e12

/** Why a node metric's value cannot be what its name says (the answer is refused, 69), or nothing. */
function checkValue(name: string, value: number): string | undefined {
  if (TIMESTAMPS.has(name)) return value >= 0 && value <= MAX_SECONDS ? undefined : 'is not a time (seconds since 1970)'
  if (FLAGS.has(name)) return value === 0 || value === 1 ? undefined : 'is not 0 or 1'
  if (name === 'last_attempt_exit_code') return Number.isInteger(value) && value >= 0 && value <= 255 ? undefined : 'is not an exit code (0-255)'
  if (name === 'last_run_resources') return Number.isSafeInteger(value) && value >= 0 ? undefined : 'is not a count of resources'
  return undefined
}

/**
 * The characters of label values a fleet view keeps, all nodes together: a node's come to
 * some 450 (its name, app, channel, releases, target), so this is 200,000 nodes with room.
 * More is 69: a label a node can fill at will never grows memory past it.
 */
export const MAX_KEPT_CHARS = 128 * 1024 * 1024

/**
 * A label as the node's metrics file wrote it. A target label of the same name in the scrape
 * configuration (`labels: {node: host-a}`, common) makes Prometheus rename the node's to
 * `exported_node` (unless `honor_labels: true`): read that when present, or every node would
 * take the target's name. Never for instance and job, which only the scrape sets: a node
 * exporting its own cannot pass for another target.
 */
function exporterLabel(labels: Record<string, string>, name: string): string | undefined {
  const exported = `exported_${name}`
  if (!TARGET.includes(name) && Object.hasOwn(labels, exported)) return labels[exported]
  return Object.hasOwn(labels, name) ? labels[name] : undefined
}

/** What a fleet view keeps of its answers, held to MAX_NODES per query and MAX_KEPT_CHARS in all (69, naming the query). */
function keeper(client: PrometheusClient) {
  let chars = 0
  const refuse = (query: string, why: string) =>
    new FleetUnavailableError(`prometheus ${terminalUrl(client.url)}: query ${terminalText(query, 200)}: ${why}`, ['check --prometheus: a fleet this size is beyond what fleet status and promote read'])
  const count = (query: string, text: string) => {
    chars += text.length
    if (chars > MAX_KEPT_CHARS) throw refuse(query, `labels of more than ${MAX_KEPT_CHARS} characters in all`)
  }

  return {
    /** A map of scrape targets. */
    targets<T>(query: string): {map: Map<string, T>; add(key: string, value: T): void} {
      const map = new Map<string, T>()
      return {
        map,
        add(key, value) {
          if (map.size >= MAX_NODES && !map.has(key)) throw refuse(query, `more than ${MAX_NODES} nodes (scrape targets) in the answer`)
          count(query, key)
          map.set(key, value)
        },
      }
    },
    /** The labels of a series that are read (the node's own, where Prometheus renamed them: see exporterLabel). */
    pick(query: string, labels: Record<string, string>, names: string[]): Record<string, string> {
      const picked: Record<string, string> = {}
      for (const name of names) {
        const value = exporterLabel(labels, name)
        if (value === undefined) continue
        count(query, value)
        picked[name] = value
      }

      return picked
    },
  }
}

/**
 * The fleet as the node exporters' Prometheus sees it: one query for every current series
 * of the node metrics, one for the nodes seen within the lookback (so a node whose
 * exporter went quiet is listed as stopped, never left out), one for their last attempt;
 * and only when a stopped node reported more than one label set, one for the newest.
 * Each answer is read as it arrives: per node, the newest series of each metric is kept.
 */
export async function readPromFleet(url: string, options: PromFleetOptions = {}): Promise<PromFleet> {
  const client = new PrometheusClient(url, {timeoutMs: options.timeoutMs, deadlineMs: options.deadlineMs})
  const lookbackSeconds = Math.max(60, Math.round((options.lookbackMs ?? DEFAULT_LOOKBACK_MS) / 1000))
  const [currentQuery, seenQuery, lastAttemptQuery] = fleetQueries(lookbackSeconds)
  // Per target, its series by metric (of last_run_resources, the corrective changes only), each with the labels read.
  const kept = keeper(client)
  const current = kept.targets<Map<string, Kept>>(currentQuery)
  // Per target, the first label set it reported within the lookback, and how many it did.
  const seen = kept.targets<{labels: Record<string, string>; sets: number}>(seenQuery)
  const lastAttempts = kept.targets<number>(lastAttemptQuery)
  // Per target (one of `current`'s), the first metric two of its series disagree on.
  const conflicts = new Map<string, string>()
  // Per target, the node names its desired-release series gave (more than one: several nodes' files behind one exporter).
  const names = new Map<string, TargetNames>()
  const [atCurrent, atSeen] = await Promise.all([
    client.query(currentQuery, (sample) => {
      const name = sample.labels.__name__?.replace(/^localpuppet_/, '')
      if (name === undefined || !KEPT.has(name)) return
      const why = checkValue(name, sample.value)
      if (why) return why
      if (name === 'last_run_resources' && sample.labels.kind !== 'corrective_change') return
      const key = targetKey(sample.labels)
      const series = current.map.get(key) ?? new Map<string, Kept>([['', {value: 0, labels: kept.pick(currentQuery, sample.labels, TARGET)}]])
      if (series.size === 1) current.add(key, series)
      const before = series.get(name)
      // A name not seen of this target yet is counted against MAX_KEPT_CHARS like every label kept (its first, with the series kept).
      const named = name === 'desired_release_info' ? exporterLabel(sample.labels, 'node') : undefined
      const known = names.get(key)
      if (named !== undefined && !known?.names.has(named)) noteName(names, key, known === undefined ? named : kept.pick(currentQuery, sample.labels, ['node']).node)
      if (before === undefined) series.set(name, {value: sample.value, labels: kept.pick(currentQuery, sample.labels, KEPT_LABELS[name] ?? [])})
      else if (!conflicts.has(key) && !sameKept(before, sample.value, sample.labels, KEPT_LABELS[name] ?? [])) {
        // Which one comes first is Prometheus' order, not the node's newest: neither is believed.
        const [low, high] = [before.value, sample.value].sort((a, b) => a - b)
        conflicts.set(key, `its metrics disagree: two series of localpuppet_${name}, ${low} and ${high}`)
      }
    }),
    client.query(seenQuery, (sample) => {
      const key = targetKey(sample.labels)
      const known = seen.map.get(key)
      if (known) known.sets++
      else seen.add(key, {labels: kept.pick(seenQuery, sample.labels, DESIRED), sets: 1})
    }),
    client.query(lastAttemptQuery, (sample) => {
      const why = checkValue('last_attempt_timestamp_seconds', sample.value)
      if (why) return why
      if (!lastAttempts.map.has(targetKey(sample.labels))) lastAttempts.add(targetKey(sample.labels), sample.value)
    }),
  ])
  const at = atCurrent ?? atSeen ?? Date.now()
  const nodes: PromNode[] = []
  const reporting = new Set<string>()
  for (const [target, series] of current.map) {
    if (!series.has('desired_release_info') && !series.has('last_attempt_timestamp_seconds')) continue
    nodes.push(nodeFrom(series, collision(names.get(target), series.get('')!.labels.instance ?? '') ?? conflicts.get(target)))
    reporting.add(target)
  }

  // A node that stopped reporting: the label set it reported last (its release or channel may have changed within the lookback).
  const stopped = new Map([...seen.map].filter(([target]) => !reporting.has(target)))
  const [newest, applied] = await Promise.all([newestLabelSets(client, kept, stopped, lookbackSeconds), lastApplied(client, kept, stopped, lookbackSeconds)])
  for (const [target, {labels}] of stopped) nodes.push({...stoppedNode(newest.get(target) ?? labels, lastAttempts.map.get(target)), applied: applied.get(target) ?? null})
  // Two live targets under one name: believed as a node that disagrees with itself (not on its release, fleet status exits 1).
  const one: PromNode[] = freshestPerNode(nodes, (a, b) => a.app === b.app && a.channel === b.channel).map(({liveTwins, ...node}) => {
    if (liveTwins === undefined) return node
    const conflict = twinsConflict(node.node, node.instance, liveTwins)
    return {...node, conflict, message: conflict, onWanted: null}
  })
  one.sort((a, b) => (a.node < b.node ? -1 : a.node > b.node ? 1 : 0))
  return {nodes: one, at, url: client.url}
}

/**
 * For each stopped target that reported more than one label set of the desired-release
 * info within the lookback, the one scraped last: one query of the raw samples of just
 * those targets (their own timestamps; last_over_time answers at the evaluation time).
 */
async function newestLabelSets(client: PrometheusClient, kept: ReturnType<typeof keeper>, stopped: Map<string, {labels: Record<string, string>; sets: number}>, lookbackSeconds: number): Promise<Map<string, Record<string, string>>> {
  const ambiguous = [...stopped.values()].filter(({sets}) => sets > 1)
  const newest = new Map<string, Record<string, string>>()
  if (ambiguous.length === 0) return newest
  const instances = [...new Set(ambiguous.map(({labels}) => labels.instance ?? ''))]
  const best = new Map<string, number>()
  const selector = `localpuppet_desired_release_info{instance=~${promRegexLiteral(instances)}}`
  await client.lastSeen(selector, lookbackSeconds, ({labels, at}) => {
    const target = targetKey(labels)
    if (!stopped.has(target) || !(at > (best.get(target) ?? Number.NEGATIVE_INFINITY))) return
    best.set(target, at)
    newest.set(target, kept.pick(selector, labels, DESIRED))
  })
  return newest
}

/**
 * For each stopped target, the release it reported applied last (the newest scraped
 * series of its applied-release info within the lookback): what it was running when it
 * went quiet, rather than nothing. One query, of just those targets, only when there are.
 */
async function lastApplied(client: PrometheusClient, kept: ReturnType<typeof keeper>, stopped: Map<string, {labels: Record<string, string>}>, lookbackSeconds: number): Promise<Map<string, string>> {
  const applied = new Map<string, string>()
  if (stopped.size === 0) return applied
  const instances = [...new Set([...stopped.values()].map(({labels}) => labels.instance ?? ''))]
  const best = new Map<string, number>()
  const selector = `localpuppet_applied_release_info{instance=~${promRegexLiteral(instances)}}`
  await client.lastSeen(selector, lookbackSeconds, ({labels, at}) => {
    const target = targetKey(labels)
    const release = kept.pick(selector, labels, ['release']).release
    if (!stopped.has(target) || !release || !(at > (best.get(target) ?? Number.NEGATIVE_INFINITY))) return
    best.set(target, at)
    applied.set(target, release)
  })
  return applied
}

/** The app and channel of the input a node follows, as its ref names them: for metrics whose own labels left them empty. */
function refOf(ref: string | null): ReleaseRef | null {
  if (ref === null) return null
  try {
    return parseReleaseRef(ref)
  } catch {
    return null
  }
}

const appOf = (ref: string | null) => refOf(ref)?.app ?? null
const channelOf = (ref: string | null) => {
  const parsed = refOf(ref)
  return parsed?.kind === 'channel' ? parsed.channel : null
}

const iso = (seconds: number | undefined) => (seconds === undefined || !Number.isFinite(seconds) ? null : new Date(seconds * 1000).toISOString())

/** Whether a second series of a metric says what the one kept does: its value and the labels read of it (others may differ). */
function sameKept(kept: Kept, value: number, labels: Record<string, string>, names: string[]): boolean {
  if (!Object.is(kept.value, value)) return false
  return names.every((name) => kept.labels[name] === exporterLabel(labels, name))
}

/** A node from its series kept (under '', its target's labels), and what two of them disagreed on. */
function nodeFrom(series: Map<string, Kept>, conflict?: string): PromNode {
  const one = (name: string) => series.get(name)
  const desired = one('desired_release_info')?.labels
  const applied = one('applied_release_info')?.labels.release ?? null
  const exit = one('last_attempt_exit_code')
  const running = one('run_in_progress')?.value === 1
  const disabled = one('puppet_disabled')
  const success = one('last_run_success')
  const corrective = one('last_run_resources')
  const attempt = one('last_attempt_info')?.labels
  const state = running ? 'running' : (exit?.labels.state ?? 'no runs')
  const firstError = cut(attempt?.first_error, MAX_FIRST_ERROR_CHARS)
  const labels = series.get('')!.labels
  const resolved = desired?.release || null
  const ref = desired?.ref || null
  return {
    node: desired?.node || labels.instance || '?',
    instance: labels.instance ?? '',
    job: labels.job ?? '',
    app: desired?.app || appOf(ref),
    channel: desired?.channel || channelOf(ref),
    wanted: ref,
    desired: resolved,
    applied,
    state,
    // The newest attempt's release (a refused one's too); metrics from before that label: the newest completed run's.
    release: exit && 'release' in exit.labels ? exit.labels.release || null : (one('release_info')?.labels.release ?? null),
    at: iso(one('last_attempt_timestamp_seconds')?.value),
    noop: false,
    drift: corrective ? corrective.value : null,
    disabled: disabled?.value === 1 ? disabled.labels.message || '(no message)' : null,
    message: conflict ?? (FAILED_STATES.has(state) ? firstError : null),
    // Series that disagree are not believed: the node counts as not seen on its release (fleet status exits 1).
    onWanted: conflict !== undefined ? null : resolved ? applied === resolved : null,
    lastSuccessAt: iso(one('last_success_timestamp_seconds')?.value),
    healthySince: iso(one('healthy_since_timestamp_seconds')?.value),
    lastRunSuccess: success ? success.value === 1 : null,
    exitCode: exit ? exit.value : null,
    runId: cut(attempt?.run_id, MAX_RUN_ID_CHARS),
    firstError,
    stopped: false,
    ...(conflict === undefined ? {} : {conflict}),
  }
}

function stoppedNode(labels: Record<string, string>, lastAttempt: number | undefined): PromNode {
  return {
    node: labels.node || labels.instance || '?',
    instance: labels.instance ?? '',
    job: labels.job ?? '',
    app: labels.app || appOf(labels.ref || null),
    channel: labels.channel || channelOf(labels.ref || null),
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
    onWanted: node.stopped || node.conflict !== undefined ? null : release !== null && node.applied === release,
    message: why ?? node.message,
  }
}

/** fleet status --prometheus: the same rows and counts as the MCollective view, from the nodes' metrics. */
export async function fleetStatusViaPrometheus(url: string, options: PromFleetOptions = {}): Promise<FleetStatus & {at: string; wantedFrom: WantedFrom}> {
  const fleet = await readPromFleet(url, options)
  return fleetStatusOf(fleet, options, `Prometheus ${fleet.url} (every node seen in the last ${Math.round((options.lookbackMs ?? DEFAULT_LOOKBACK_MS) / 3_600_000)}h)`)
}

/** A fleet read from Prometheus or PuppetDB as fleet status shows it: the nodes following --channel, wanted through the index now (--source). */
export function fleetStatusOf(
  fleet: PromFleet,
  options: {channel?: string; wanted?: WantedIndex | null},
  expectedFrom: string,
  /** What to check when no node was seen at all. */
  noneSeen = 'check that the nodes write metrics_file and that their node exporters are scraped',
): FleetStatus & {at: string; wantedFrom: WantedFrom} {
  const {wanted} = options
  const following = options.channel === undefined ? fleet.nodes : fleet.nodes.filter((node) => node.channel === options.channel)
  const nodes = wanted ? following.map((node) => wantedThroughIndex(node, wanted.index)) : following
  const wantedFrom: WantedFrom = wanted
    ? {from: 'index', source: redactUrl(wanted.source), version: wanted.version, signedBy: wanted.signedBy}
    : {from: 'last run', source: null, version: null, signedBy: null}
  const status = summarizeFleet(nodes, expectedFrom)
  return {...status, ...(nodes.length === 0 ? {noNodes: whyNoNodes(fleet, options.channel, noneSeen)} : {}), at: new Date(fleet.at).toISOString(), wantedFrom}
}

/** Why a fleet view lists no node, in one line: none seen at all, or none of those seen follows --channel (and which they do follow). */
function whyNoNodes(fleet: PromFleet, channel: string | undefined, noneSeen: string): string {
  if (fleet.nodes.length === 0) return `no node has reported within the lookback: ${noneSeen}`
  const counts = new Map<string, number>()
  for (const node of fleet.nodes) counts.set(node.channel ?? '(none)', (counts.get(node.channel ?? '(none)') ?? 0) + 1)
  const followed = [...counts].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([name, n]) => `${name} = ${n}`)
  return `no node follows channel ${channel}: of the ${fleet.nodes.length} node${fleet.nodes.length === 1 ? '' : 's'} seen, by channel: ${followed.join(', ')}`
}
