import {resolve} from 'node:path'

import {NotFoundError, UsageError} from '../errors.js'
import type {ChannelHealth, HealthOptions} from '../fleet/channel-health.js'
import {type IndexUpdate, readCurrentIndex} from '../repository/index-update.js'
import {REPOSITORY_INDEX} from '../repository/repository-index.js'
import {closest} from '../util/did-you-mean.js'
import {own} from '../util/own.js'
import {type ChannelPolicy, MAX_POLICY_FOR_MS, MAX_POLICY_NODES, describePolicy, readChannelRecords, usageReason} from '../repository/channel-records.js'
import {formatAge} from '../util/duration.js'
import {parseChannelRef} from './channel-ref.js'
import {type RecordsUpdateOptions, updateRecords} from './records-update.js'
import type {PuppetDbConfig} from '../puppetdb/client.js'

/** Where a gate reads the fleet: a Prometheus URL, or a PuppetDB. */
type FleetSource = string | PuppetDbConfig

export interface SetPolicyOptions extends RecordsUpdateOptions {
  /** The channel the policy guards: `foo/channels/stable`. */
  channel: string
  /** null: remove the channel's policy. */
  policy: Pick<ChannelPolicy, 'requireHealthy' | 'forMs' | 'minNodes'> | null
}

export interface SetPolicyResult extends IndexUpdate {
  repo: string
  channel: string
  policy: ChannelPolicy | null
  previous: ChannelPolicy | null
}

/**
 * Sets (or removes) a channel's policy in the signed index: from then on every promote to the
 * channel requires its nodes' health on another channel of the app (promote --require-healthy,
 * kept). The channel it names must exist (66 naming the ones the app has): a typo would
 * otherwise shut the channel for good.
 */
export async function setChannelPolicy(options: SetPolicyOptions): Promise<SetPolicyResult> {
  const repo = resolve(options.repo)
  const {app, channel} = parseChannelRef(options.channel)
  if (options.policy?.requireHealthy === channel) throw new UsageError(`--require-healthy ${channel}: a channel's policy names another channel (the one it promotes from)`)
  // What the index would not read back (readChannelRecords) is never written: it would stop every later change of the records.
  if (options.policy && options.policy.forMs > MAX_POLICY_FOR_MS) throw new UsageError(`--for: ${formatAge(options.policy.forMs)} is longer than a year (at most ${formatAge(MAX_POLICY_FOR_MS)})`)
  if (options.policy && options.policy.minNodes > MAX_POLICY_NODES) throw new UsageError(`--min-nodes: ${options.policy.minNodes} is more than ${MAX_POLICY_NODES}`)
  const updated = await updateRecords({...options, repo}, ({index, records, by, at}) => {
    const entry = own(index.apps, app)
    if (entry === undefined) throw new NotFoundError(`${app} has no tags in ${repo}`, [`publish one first: localpuppet publish ${app}-TAG.tar.gz --repo ${options.repo}`])
    const previous = own(records.policies[app], channel) ?? null
    if (options.policy === null) {
      const {[channel]: _removed, ...rest} = (entry.policies ?? {}) as Record<string, ChannelPolicy>
      entry.policies = rest
      return {policy: null, previous}
    }

    const known = Object.keys(entry.channels ?? {})
    if (!known.includes(options.policy.requireHealthy)) {
      const guess = closest(options.policy.requireHealthy, known)
      throw new NotFoundError(`--require-healthy ${options.policy.requireHealthy}: ${app} has no channel ${options.policy.requireHealthy} in ${repo}${guess ? ` (did you mean ${guess}?)` : ''}${known.length > 0 ? `; it has ${known.join(', ')}` : ''}`, [
        `promote a tag to it first: localpuppet promote ${app}/tags/TAG --channel ${options.policy.requireHealthy} --repo ${options.repo}`,
      ])
    }

    const loop = policyLoop(records.policies[app] ?? {}, channel, options.policy.requireHealthy)
    if (loop !== null) {
      throw new UsageError(`--require-healthy ${options.policy.requireHealthy}: ${app}'s policies would go round in a loop (${loop.join(' -> ')}): no new tag could reach any of these channels without --override-policy`, [
        `remove or change one of them first: localpuppet channel policy ${app}/channels/NAME --clear --repo ${options.repo}`,
      ])
    }

    const policy: ChannelPolicy = {...options.policy, setAt: at, setBy: by}
    entry.policies = {...entry.policies, [channel]: policy}
    return {policy, previous}
  })
  return {repo, channel: `${app}/channels/${channel}`, ...updated}
}

/**
 * The loop `channel` requiring health on `requires` would close among the app's other
 * policies (`[channel, requires, ..., channel]`), or null. Each policy names one channel,
 * so following them from `requires` either ends or comes back.
 */
function policyLoop(policies: Record<string, ChannelPolicy>, channel: string, requires: string): string[] | null {
  const path = [channel, requires]
  for (let next = requires; next !== channel; ) {
    const policy = own(policies, next)
    if (policy === undefined || path.indexOf(policy.requireHealthy) > 0) return null
    next = policy.requireHealthy
    path.push(next)
  }

  return path
}

/** What a channel's policy says of one promote, before the index is touched. */
export type PolicyVerdict =
  | {policy: null}
  | {policy: ChannelPolicy; met: true; health: ChannelHealth}
  | {policy: ChannelPolicy; met: false; health: ChannelHealth; why: string}
  | {policy: ChannelPolicy; override: string}

export interface PolicyCheckOptions {
  repo: string
  app: string
  tag: string
  channel: string
  /** --override-policy REASON: move the channel even though the policy is not met (recorded in its history). */
  override?: string
  /** The fleet's source to ask (a Prometheus URL, or a PuppetDB), looked up only when the policy must be checked; null: none configured (64 then). */
  prometheus: FleetSource | null | (() => Promise<FleetSource | null>)
  health?: Pick<HealthOptions, 'deadlineMs' | 'staleAfterMs' | 'lookbackMs'>
  /** The health check (tests). */
  channelHealth?: (source: FleetSource, options: HealthOptions) => Promise<ChannelHealth>
}

/**
 * Judges a promote against the channel's policy in the index as it is now: no policy, met,
 * not met (and why, one line naming the policy and what was missing), or overridden with a
 * reason. Prometheus is asked outside the repository's lock; promote then moves the channel
 * only if the policy is still the one judged (promoteChannel's `policy`).
 */
export async function checkChannelPolicy(options: PolicyCheckOptions): Promise<PolicyVerdict> {
  const repo = resolve(options.repo)
  const {index} = await readCurrentIndex(repo)
  const policy = own(readChannelRecords(index, `${repo}/${REPOSITORY_INDEX}`).policies[options.app], options.channel)
  const where = `${options.app}/channels/${options.channel}`
  if (policy === undefined) {
    if (options.override !== undefined) throw new UsageError(`--override-policy: ${where} has no policy to override`)
    return {policy: null}
  }

  if (options.override !== undefined) return {policy, override: usageReason(options.override, '--override-policy')}
  const rule = `policy of ${where} (${describePolicy(policy)})`
  const prometheus = typeof options.prometheus === 'function' ? await options.prometheus() : options.prometheus
  if (prometheus === null) {
    throw new UsageError(`${where} has a policy (${describePolicy(policy)}): promote needs --prometheus or --puppetdb (or their setting) to check it`, [
      `or move it anyway, recorded: --override-policy REASON`,
    ])
  }

  const check = options.channelHealth ?? (await import('../fleet/channel-health.js')).channelHealth
  const health = await check(prometheus, {
    ...options.health,
    app: options.app,
    release: `${options.app}/tags/${options.tag}`,
    channel: policy.requireHealthy,
    forMs: policy.forMs,
    minNodes: policy.minNodes,
  })
  return health.ok ? {policy, met: true, health} : {policy, met: false, health, why: `${rule} not met: ${health.why}`}
}
