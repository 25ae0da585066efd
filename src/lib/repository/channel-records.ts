import {ConflictError, NotFoundError, ReleaseError, UsageError} from '../errors.js'
import {type ReleaseRef, isValidChannelName, isValidVersionName} from '../release/release-ref.js'
import {formatAge} from '../util/duration.js'
import {isMapping} from '../util/json.js'
import {own} from '../util/own.js'
import {needsEscaping, terminalText} from '../util/terminal-text.js'
import {type RepositoryIndex, tagInIndex} from './repository-index.js'
import {MAX_REASON_CHARS, type YankRecord, isReason, isRecordTime, isSigner} from './yank-record.js'

export {MAX_REASON_CHARS, type YankRecord} from './yank-record.js'

/**
 * How many moves of one channel the signed index keeps: the newest ones, older ones dropped
 * by the promote that would make one more. Enough for months of daily promotions; bounded, so
 * the index (which every node downloads on every run) does not grow without end.
 */
export const MAX_CHANNEL_HISTORY = 50

/** One move of a channel, as the index records it (newest last). */
export interface ChannelMove {
  at: string
  /** promote: `promote`; back: `channel back` (to the tag the channel named before). */
  action: 'promote' | 'back'
  /** The tag the channel named before (null: the channel was new). */
  from: string | null
  to: string
  by: string | null
  /** The channel's policy was not met and `--override-policy REASON` moved it anyway. */
  override?: {reason: string; policy: string}
}

/** A channel's policy: what every promote to it requires (`channel policy`). */
export interface ChannelPolicy {
  /** Every node following this channel of the app must be healthy on the tag... */
  requireHealthy: string
  /** ...for at least this long (ms)... */
  forMs: number
  /** ...and at least this many of them. */
  minNodes: number
  setAt: string
  setBy: string | null
}

export interface ChannelRecords {
  /** app → channel → moves, oldest first. */
  history: Record<string, Record<string, ChannelMove[]>>
  /** app → channel → policy. */
  policies: Record<string, Record<string, ChannelPolicy>>
}

/** A policy asking more than a year of health is a typo. */
export const MAX_POLICY_FOR_MS = 366 * 86_400_000
/** The most nodes a policy may require. */
export const MAX_POLICY_NODES = 1_000_000

/** The tag's yank record, if it is yanked. */
export function yankOf(index: RepositoryIndex, app: string, tag: string): YankRecord | undefined {
  return own(own(index.apps, app)?.tags, tag)?.yanked
}

/** One line for a yanked tag: `foo/tags/1.5.0 is yanked (2026-11-28T00:20:00.000Z: breaks nginx)`. */
export function describeYank(app: string, tag: string, yank: YankRecord): string {
  return `${app}/tags/${tag} is yanked (${yank.at}: ${yank.reason})`
}

/** One line for a policy: `healthy on canary for 30m, at least 1 node`. */
export function describePolicy(policy: Pick<ChannelPolicy, 'requireHealthy' | 'forMs' | 'minNodes'>): string {
  return `healthy on ${policy.requireHealthy}${policy.forMs > 0 ? ` for ${formatAge(policy.forMs)}` : ''}, at least ${policy.minNodes} node${policy.minNodes === 1 ? '' : 's'}`
}

/**
 * The channels' histories and policies of an index, every entry checked: publishers and the
 * operator's commands read them (nodes never do: a node ignores both, so an index with a
 * damaged history still delivers releases). Anything malformed is a ReleaseError (65) naming
 * the entry: nothing is written over a record that cannot be read, and no policy is skipped
 * because it could not be read.
 */
export function readChannelRecords(index: RepositoryIndex, label: string): ChannelRecords {
  const fail = (where: string, why: string): never => {
    throw new ReleaseError(`${label}: ${where}: ${why}`, ['the index was changed by something other than localpuppet: restore it (or that entry) from a backup and re-sign it'])
  }

  const records: ChannelRecords = {history: {}, policies: {}}
  for (const [app, entry] of Object.entries(index.apps)) {
    if (entry.history !== undefined) {
      if (!isMapping(entry.history)) fail(`apps.${app}.history`, 'not an object')
      for (const [channel, moves] of Object.entries(entry.history)) {
        const where = `apps.${app}.history.${channel}`
        if (!isValidChannelName(channel)) fail(where, 'invalid channel name')
        if (!Array.isArray(moves)) fail(where, 'not a list')
        records.history[app] ??= {}
        records.history[app][channel] = (moves as unknown[]).map((move, i) => {
          const why = channelMoveProblem(move)
          return why === null ? (move as ChannelMove) : fail(`${where}[${i}]`, why)
        })
      }
    }

    if (entry.policies !== undefined) {
      if (!isMapping(entry.policies)) fail(`apps.${app}.policies`, 'not an object')
      for (const [channel, policy] of Object.entries(entry.policies)) {
        const where = `apps.${app}.policies.${channel}`
        if (!isValidChannelName(channel)) fail(where, 'invalid channel name')
        const why = channelPolicyProblem(policy, channel)
        if (why !== null) fail(where, why)
        records.policies[app] ??= {}
        records.policies[app][channel] = policy as ChannelPolicy
      }
    }
  }

  return records
}

function channelMoveProblem(move: unknown): string | null {
  if (!isMapping(move)) return 'not an object'
  if (move.action !== 'promote' && move.action !== 'back') return `action ${JSON.stringify(move.action)} is neither promote nor back`
  if (!isRecordTime(move.at)) return `at ${JSON.stringify(move.at)} is not an ISO 8601 time`
  if (move.from !== null && (typeof move.from !== 'string' || !isValidVersionName(move.from))) return `from ${JSON.stringify(move.from)} is not a tag or null`
  if (typeof move.to !== 'string' || !isValidVersionName(move.to)) return `to ${JSON.stringify(move.to)} is not a tag`
  if (!isSigner(move.by)) return `by ${JSON.stringify(move.by)} is not a key id or null`
  if (move.override !== undefined && (!isMapping(move.override) || !isReason(move.override.reason) || !isReason(move.override.policy))) return 'override is not {reason, policy}'
  return null
}

function channelPolicyProblem(policy: unknown, channel: string): string | null {
  if (!isMapping(policy)) return 'not an object'
  if (typeof policy.requireHealthy !== 'string' || !isValidChannelName(policy.requireHealthy)) return `requireHealthy ${JSON.stringify(policy.requireHealthy)} is not a channel name`
  if (policy.requireHealthy === channel) return 'requires health on the channel itself'
  if (!Number.isSafeInteger(policy.forMs) || (policy.forMs as number) < 0 || (policy.forMs as number) > MAX_POLICY_FOR_MS) return `forMs ${JSON.stringify(policy.forMs)} is not a duration`
  if (!Number.isSafeInteger(policy.minNodes) || (policy.minNodes as number) < 1 || (policy.minNodes as number) > MAX_POLICY_NODES) return `minNodes ${JSON.stringify(policy.minNodes)} is not a count from 1`
  if (!isRecordTime(policy.setAt)) return `setAt ${JSON.stringify(policy.setAt)} is not an ISO 8601 time`
  if (!isSigner(policy.setBy)) return `setBy ${JSON.stringify(policy.setBy)} is not a key id or null`
  return null
}

/** Adds a move to a channel's history in the index, keeping the newest MAX_CHANNEL_HISTORY. */
export function recordMove(index: RepositoryIndex, app: string, channel: string, move: ChannelMove): void {
  const entry = index.apps[app]
  const moves = [...((own(entry.history, channel) as ChannelMove[] | undefined) ?? []), move]
  entry.history = {...entry.history, [channel]: moves.slice(-MAX_CHANNEL_HISTORY)}
}

/**
 * The tag `channel back` returns a channel to: the one the channel named before its current
 * tag was promoted to it (the `from` of the newest promote to the current tag). Backs are a
 * stack: after 1.3.0 → 1.4.0 → 1.5.0, back gives 1.4.0, back again 1.3.0. Null when the
 * history (bounded: MAX_CHANNEL_HISTORY) holds no earlier tag.
 */
export function previousTag(moves: ChannelMove[], current: string): string | null {
  for (let i = moves.length - 1; i >= 0; i--) {
    const move = moves[i]
    if (move.action === 'promote' && move.to === current && move.from !== null && move.from !== current) return move.from
  }

  return null
}

/** A reason given on the command line (--reason, --override-policy): one line, not empty, bounded (64 otherwise). */
export function usageReason(reason: string, flag: string): string {
  const trimmed = reason.trim()
  if (trimmed.length === 0) throw new UsageError(`${flag}: give a reason (it is recorded in the signed index)`)
  if (trimmed.length > MAX_REASON_CHARS) throw new UsageError(`${flag}: the reason is ${trimmed.length} characters; at most ${MAX_REASON_CHARS}`)
  // Control characters, and the invisible ones that reorder or hide text (a bidi override, U+2028): the reason is read in a terminal by others.
  if (needsEscaping(trimmed)) throw new UsageError(`${flag}: the reason must be one line of text, without control characters or invisible formatting characters (${terminalText(trimmed, 80)})`)
  return trimmed
}

/**
 * The line saying that `ref` names a yanked tag exactly (a tag, a range that is a tag's exact
 * name, or a channel on one), or null. A range that merely matches a yanked tag is not
 * refused: it resolves to the newest match that is not yanked (tagInIndex).
 */
export function yankNamedBy(index: RepositoryIndex, ref: ReleaseRef): string | null {
  if (ref.kind !== 'tag' && ref.kind !== 'range' && ref.kind !== 'channel') return null
  const tag = tagInIndex(index, ref)
  const yank = tag === undefined ? undefined : yankOf(index, ref.app, tag)
  return yank === undefined ? null : describeYank(ref.app, tag!, yank)
}

/** A channel's policy as promote judged it before the lock: the policy (null: none) and, when overridden, the reason. */
export interface JudgedPolicy {
  policy: ChannelPolicy | null
  override?: string
}

export interface Promotion {
  app: string
  tag: string
  channel: string
  /** The tag the channel names now (null: a new channel). */
  previous: string | null
  /** The key id signing the new index, or null. */
  by: string | null
  at: string
  /** The channel's policy as judged before the lock (checkChannelPolicy), and an override's reason; undefined: not judged. */
  policy?: JudgedPolicy
}

/**
 * Under the repository's lock, with the index just read: a promote's checks of the channel's
 * records, then its move recorded in the channel's history. A yanked tag is refused (66
 * naming the yank); so is a channel whose policy is not the one judged before the lock (73:
 * it was set or changed meanwhile, or the caller never judged it); the histories must read
 * (65 naming the entry). A promote that does not move the channel records nothing.
 */
export function admitPromotion(index: RepositoryIndex, label: string, promotion: Promotion): void {
  const {app, tag, channel} = promotion
  const where = `${app}/channels/${channel}`
  const yank = own(index.apps, app)?.tags[tag]?.yanked
  if (yank) throw new NotFoundError(`${where} not moved: ${describeYank(app, tag, yank)}, and no channel may name it`, ['promote another tag'])
  const policy = own(readChannelRecords(index, label).policies[app], channel) ?? null
  const judged = promotion.policy?.policy ?? null
  if (JSON.stringify(policy) !== JSON.stringify(judged)) {
    throw new ConflictError(
      policy === null
        ? `${where} not moved: its policy was removed while promote checked it; run promote again`
        : `${where} not moved: its policy (${describePolicy(policy)}) ${judged === null ? 'was not checked' : 'changed while promote checked it'}; run promote again`,
    )
  }

  if (promotion.previous === tag) return
  const override = promotion.policy?.policy && promotion.policy.override !== undefined ? {override: {reason: promotion.policy.override, policy: describePolicy(promotion.policy.policy)}} : {}
  recordMove(index, app, channel, {at: promotion.at, action: 'promote', from: promotion.previous, to: tag, by: promotion.by, ...override})
}
