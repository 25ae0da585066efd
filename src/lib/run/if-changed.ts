import {formatAge} from '../util/duration.js'
import {previousRun} from '../state/retention.js'
import {DEFAULT_MAX_AGE_MS} from './defaults.js'
import type {RunPlan} from './run-plan.js'

/**
 * --if-changed: the reason to skip this run (the newest run that ran Puppet succeeded with
 * the same fingerprint, within --max-age), or null to enforce. Says in the log when it
 * enforces a run that would have been skipped but for its age.
 */
export async function unchangedReason(plan: RunPlan, fingerprint: string, options: {maxAgeMs?: number; now?: () => Date}, log: (text: string) => void): Promise<string | null> {
  const previous = await previousRun(plan.stateDir, plan.runId)
  const maxAgeMs = options.maxAgeMs ?? DEFAULT_MAX_AGE_MS
  const age = previous ? (options.now?.() ?? new Date()).getTime() - Date.parse(previous.finishedAt ?? previous.startedAt) : null
  if (previous?.state === 'succeeded' && previous.fingerprint === fingerprint && age !== null && age < maxAgeMs) {
    const reason = `nothing changed since run ${previous.id}, ${formatAge(age)} ago (same releases, ENC document, facts, manifest and options; --max-age ${formatAge(maxAgeMs)})`
    log(`localpuppet: skipped: ${reason}\n`)
    return reason
  }

  if (previous?.state === 'succeeded' && previous.fingerprint === fingerprint) {
    log(`localpuppet: nothing changed since run ${previous.id}, but it is ${formatAge(age ?? 0)} old (--max-age ${formatAge(maxAgeMs)}): enforcing\n`)
  }

  return null
}
