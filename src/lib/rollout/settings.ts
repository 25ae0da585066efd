import {UsageError} from '../errors.js'
import {parseDuration} from '../util/duration.js'

/** One step of `--batch`: a number of nodes, or a percentage of the nodes after the canaries. */
export type BatchStep = {count: number} | {percent: number}

/** What a rollout does when it stops: which nodes it puts back on the release they had before. */
export type RevertMode = 'failed' | 'all' | 'none'

/** Everything that decides a rollout, recorded in its record so that --resume continues it exactly. */
export interface RolloutSettings {
  /** The release to apply (`foo/tags/1.5.0`, `foo@^1.5`), or null: each node's own input. */
  ref: string | null
  /** The first N nodes, on their own. 0: none. */
  canary: number
  /** Ansible's `serial`: successive batch sizes, the last repeated. Ignored with a window. */
  batch: BatchStep[]
  /** A sliding window: keep this many nodes running (after the canaries). */
  window: number | null
  /** How many nodes may fail before no further node is started. */
  maxFailures: BatchStep
  soakMs: number
  /** Per node: a node that has not reported a final run within this long of being started has failed (`deadline`). */
  deadlineMs: number
  revert: RevertMode
  onlyOutdated: boolean
  noop: boolean
  fetch: boolean
  save: boolean
  /** Each run's own limit (apply --timeout), or null. */
  timeoutSeconds: number | null
  /** A node busy (73) with another run is tried once more after this long. */
  busyRetryMs: number
}

export const DEFAULT_DEADLINE_MS = 60 * 60_000
export const DEFAULT_BUSY_RETRY_MS = 30_000

/** `N` or `N%`, N > 0 (or >= 0 with allowZero), for --batch, --max-failures. */
export function parseStep(text: string, flag: string, allowZero = false): BatchStep {
  const match = /^\s*(\d+)\s*(%?)\s*$/.exec(text)
  const value = match ? Number(match[1]) : Number.NaN
  if (!match || !Number.isSafeInteger(value) || value < (allowZero ? 0 : 1) || (match[2] === '%' && value > 100)) {
    throw new UsageError(`${flag} ${JSON.stringify(text)}: expected a whole number${allowZero ? '' : ' > 0'} or a percentage (${allowZero ? '0' : '1'}..100%)`)
  }

  return match[2] === '%' ? {percent: value} : {count: value}
}

/** `--batch 1,5,25%,100%`: Ansible's serial list. */
export function parseBatch(text: string): BatchStep[] {
  const parts = text.split(',')
  if (parts.some((part) => part.trim() === '')) throw new UsageError(`--batch ${JSON.stringify(text)}: expected numbers or percentages separated by commas, such as 1,5,25%,100%`)
  return parts.map((part) => parseStep(part, '--batch'))
}

/** A step as a number of nodes out of `total`: a percentage rounds down, but a batch is never empty. */
export function stepSize(step: BatchStep, total: number, minimum: number): number {
  return 'count' in step ? step.count : Math.max(minimum, Math.floor((total * step.percent) / 100))
}

export function formatStep(step: BatchStep): string {
  return 'count' in step ? String(step.count) : `${step.percent}%`
}

/** The nodes after the canaries cut into batches (Ansible's serial: the last size repeats), in order. */
export function cutBatches<T>(nodes: T[], steps: BatchStep[]): T[][] {
  const groups: T[][] = []
  let index = 0
  let step = 0
  while (index < nodes.length) {
    const size = stepSize(steps[Math.min(step, steps.length - 1)], nodes.length, 1)
    groups.push(nodes.slice(index, index + size))
    index += size
    step++
  }

  return groups
}

/** The rollout's settings from its flags, checked: a usage error (64) names the flag at fault. */
export function rolloutSettings(flags: {
  ref: string | null
  canary?: number
  batch?: string
  window?: number
  'max-failures'?: string
  soak?: string
  deadline?: string
  revert?: string
  'only-outdated'?: boolean
  noop?: boolean
  fetch?: boolean
  save?: boolean
  timeout?: number
}): RolloutSettings {
  if (flags.save && flags.ref === null) throw new UsageError('--save needs a REF: the release that becomes each node\'s release')
  if (flags.save && flags.noop) throw new UsageError('--save with --noop: a dry run never moves a node\'s release; drop one of them')
  const revert = flags.revert ?? 'failed'
  if (!['failed', 'all', 'none'].includes(revert)) throw new UsageError(`--revert ${JSON.stringify(revert)}: expected failed, all or none`)
  const timeoutSeconds = flags.timeout ?? null
  return {
    ref: flags.ref,
    canary: flags.canary ?? 0,
    batch: flags.batch === undefined ? [{percent: 100}] : parseBatch(flags.batch),
    window: flags.window ?? null,
    maxFailures: parseStep(flags['max-failures'] ?? '0', '--max-failures', true),
    soakMs: flags.soak === undefined ? 0 : parseDuration(flags.soak, '--soak'),
    deadlineMs: flags.deadline === undefined ? (timeoutSeconds === null ? DEFAULT_DEADLINE_MS : timeoutSeconds * 1000 + 5 * 60_000) : parseDuration(flags.deadline, '--deadline'),
    revert: revert as RevertMode,
    onlyOutdated: flags['only-outdated'] ?? false,
    noop: flags.noop ?? false,
    fetch: flags.fetch ?? false,
    save: flags.save ?? false,
    timeoutSeconds,
    busyRetryMs: DEFAULT_BUSY_RETRY_MS,
  }
}
