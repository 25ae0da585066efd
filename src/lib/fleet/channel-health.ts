import {usageChannelName} from '../release/release-ref.js'
import {formatAge} from '../util/duration.js'
import type {PuppetDbConfig} from '../puppetdb/client.js'
import {DEFAULT_LOOKBACK_MS, FAILED_STATES, type PromNode, readPromFleet} from './sources/prometheus.js'

/** How one node following the channel stands against the release to promote. */
export interface NodeHealth {
  node: string
  instance: string
  /** healthy, or why not: not yet run, failed, disabled, stale, stopped reporting, settling (healthy for less than --for). */
  state: 'healthy' | 'not yet run' | 'failed' | 'disabled' | 'stale' | 'stopped reporting' | 'settling'
  reason: string
  /** The newest attempt's run id, and why it failed (Puppet's first error line), as its metrics say; null: not reported. */
  runId: string | null
  firstError: string | null
  applied: string | null
  healthySince: string | null
  /** Other scrape targets that reported this node's name, older or stopped: not judged, named so a name taken over is seen. */
  alsoSeenAs?: string[]
}

export interface ChannelHealth {
  ok: boolean
  /** One line: why the gate is shut, or that it is open. */
  why: string
  app: string
  channel: string
  release: string
  forMs: number
  minNodes: number
  healthy: number
  nodes: NodeHealth[]
  /** Without its credentials: Prometheus' URL, or PuppetDB's (see source). */
  prometheus: string
  /** Which source the nodes were judged from. */
  source: 'Prometheus' | 'PuppetDB'
  /** Prometheus' clock when it answered. */
  at: string
}

export interface HealthOptions {
  app: string
  /** The tag to promote: `foo/tags/1.1.0`. */
  release: string
  /** The channel whose nodes must be healthy on it. */
  channel: string
  /** How long each must have been healthy (0: its newest run succeeded on it). */
  forMs: number
  minNodes: number
  /** A node whose newest attempt is older than this is stale (default 2 h: four periods of the shipped 30-minute timer). */
  staleAfterMs?: number
  lookbackMs?: number
  /** Each Prometheus answer whole (ms; --prometheus-timeout). */
  deadlineMs?: number
}

const DEFAULT_STALE_AFTER_MS = 2 * 3_600_000
/**
 * How far ahead of Prometheus' clock a node's timestamp may be and still be believed:
 * clocks kept by NTP agree within a second; a time further ahead is suspect, never fresh.
 */
export const CLOCK_AHEAD_MS = 60_000
/** The newest attempt's states (exactly as the metrics write them, see Monitoring) that are not a failure (FAILED_STATES are). */
const FINE_STATES = new Set(['succeeded', 'skipped', 'busy', 'running', 'no runs'])

/**
 * Judges one node against the release, at Prometheus' time `now`. Anything not understood is
 * not healthy. The targets its name was also seen under are named in the reason: a live
 * target taking the name of one that stopped (a move, or another machine) is then seen.
 */
export function judgeNode(node: PromNode, options: HealthOptions, now: number): NodeHealth {
  const judged = judgeOne(node, options, now)
  if (node.alsoSeenAs === undefined || node.alsoSeenAs.length === 0) return judged
  return {...judged, alsoSeenAs: node.alsoSeenAs, reason: `${judged.reason}; also seen as ${node.alsoSeenAs.join(', ')} (older: ignored)`}
}

function judgeOne(node: PromNode, options: HealthOptions, now: number): NodeHealth {
  const base = {node: node.node, instance: node.instance, applied: node.applied, healthySince: node.healthySince, runId: node.runId ?? null, firstError: node.firstError ?? null}
  const time = (iso: string | null) => (iso === null ? Number.NaN : Date.parse(iso))
  const age = (iso: string | null) => (Number.isFinite(time(iso)) ? formatAge(now - time(iso)) : 'never')
  const ahead = (iso: string | null) => time(iso) - now > CLOCK_AHEAD_MS
  const staleAfter = options.staleAfterMs ?? DEFAULT_STALE_AFTER_MS
  if (node.stopped) return {...base, state: 'stopped reporting', reason: `its metrics are gone from Prometheus (newest attempt ${age(node.at)} ago; counted for ${formatAge(options.lookbackMs ?? DEFAULT_LOOKBACK_MS)} after its last scrape)`}
  if (node.disabled) return {...base, state: 'disabled', reason: `Puppet is disabled: ${node.disabled}`}
  if (node.conflict) return {...base, state: 'failed', reason: node.conflict}
  for (const [what, iso] of [['newest attempt', node.at], ['healthy since', node.healthySince]] as const) {
    if (ahead(iso)) return {...base, state: 'stale', reason: `${what} ${formatAge(time(iso) - now)} ahead of Prometheus' clock (the node's clock is ahead: not believed)`}
  }

  const attempt = time(node.at)
  if (!Number.isFinite(attempt) || now - attempt > staleAfter) return {...base, state: 'stale', reason: `newest attempt ${age(node.at)} ago (more than ${formatAge(staleAfter)})`}
  const on = `${node.exitCode !== null ? ` (exit ${node.exitCode})` : ''}${node.release ? ` on ${node.release}` : ''}`
  // Which run, and what Puppet said first: what the operator looks up on the node (PuppetDB gives the first error as the message).
  const firstError = node.firstError ?? (node.message && !node.conflict ? node.message : null)
  const said = `${node.runId ? `, run ${node.runId}` : ''}${firstError ? `: ${firstError}` : ''}`
  if (node.lastRunSuccess === false || FAILED_STATES.has(node.state)) return {...base, state: 'failed', reason: `newest attempt ${node.state}${on}${said}`}
  if (!FINE_STATES.has(node.state)) return {...base, state: 'failed', reason: `newest attempt in a state the metrics do not name: ${JSON.stringify(node.state)}${on}`}
  if (node.applied !== options.release) return {...base, state: 'not yet run', reason: `has applied ${node.applied ?? 'nothing'}${node.desired && node.desired !== options.release ? `; its channel resolved to ${node.desired}` : ''}`}
  if (node.lastRunSuccess !== true) return {...base, state: 'not yet run', reason: 'no completed run reported (localpuppet_last_run_success)'}
  const since = time(node.healthySince)
  const healthyFor = Number.isFinite(since) ? Math.max(0, now - since) : 0
  if (healthyFor < options.forMs) return {...base, state: 'settling', reason: `healthy on it for ${formatAge(healthyFor)} of ${formatAge(options.forMs)}`}
  return {...base, state: 'healthy', reason: `healthy on it for ${formatAge(healthyFor)}`}
}

/**
 * promote --require-healthy: every node whose input follows `channel` of `app` (by its
 * metrics) must have applied `release`, its newest run succeeded, for at least `forMs`, and
 * at least `minNodes` of them; otherwise the gate is shut and each node not there is named.
 */
export async function channelHealth(source: string | PuppetDbConfig, options: HealthOptions): Promise<ChannelHealth> {
  usageChannelName(options.channel, '--require-healthy')
  const fleet =
    typeof source === 'string'
      ? await readPromFleet(source, {lookbackMs: options.lookbackMs, deadlineMs: options.deadlineMs})
      : await (await import('./sources/puppetdb.js')).readPuppetDbFleet(source, {lookbackMs: options.lookbackMs, deadlineMs: options.deadlineMs})
  const following = fleet.nodes.filter((node) => node.channel === options.channel && node.app === options.app)
  const nodes = following.map((node) => judgeNode(node, options, fleet.at))
  const healthy = nodes.filter((node) => node.state === 'healthy').length
  const waiting = nodes.filter((node) => node.state !== 'healthy')
  const where = `${options.app}/channels/${options.channel}`
  let why: string
  if (following.length === 0) why = `no node follows ${where} in ${fleet.url}'s ${typeof source === 'string' ? 'metrics' : 'reports and facts'}`
  else if (waiting.length > 0) why = `${waiting.length} of ${nodes.length} nodes following ${where} are not healthy on ${options.release}: ${waiting.map((node) => `${node.node} (${node.state})`).join(', ')}${waiting.some((node) => node.state === 'stopped reporting') ? `; a node that stopped reporting counts for ${formatAge(options.lookbackMs ?? DEFAULT_LOOKBACK_MS)} after its last scrape (to retire one sooner: "Retiring a node" in docs/fleet-pull.md)` : ''}`
  else if (healthy < options.minNodes) why = `only ${healthy} node${healthy === 1 ? '' : 's'} following ${where} healthy on ${options.release}; --min-nodes ${options.minNodes}`
  else why = `all ${healthy} nodes following ${where} are healthy on ${options.release}`
  return {
    ok: following.length > 0 && waiting.length === 0 && healthy >= options.minNodes,
    why,
    app: options.app,
    channel: options.channel,
    release: options.release,
    forMs: options.forMs,
    minNodes: options.minNodes,
    healthy,
    nodes,
    prometheus: fleet.url,
    source: typeof source === 'string' ? 'Prometheus' : 'PuppetDB',
    at: new Date(fleet.at).toISOString(),
  }
}
