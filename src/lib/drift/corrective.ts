import {readChangedResources} from '../puppet/run-report.js'
import type {ResourceCounts} from '../puppet/resource-counts.js'
import {type RunRecord, newestRecord} from '../state/run-record.js'

/** The most resource names a record keeps of one run's drift (the count is always whole). */
export const MAX_CORRECTED_NAMES = 20
/** The longest resource name kept (a title can be any length). */
const MAX_NAME_CHARS = 200

/** What a run corrected: the run whose fingerprint it shared, and (some of) the resources it put back. */
export interface Corrected {
  /** The previous run, which succeeded with the same fingerprint. */
  since: string
  /** The resources put back, in Puppet's order (at most MAX_CORRECTED_NAMES). */
  resources: string[]
}

/** States of a run that ran (or tried to run) Puppet: what the system was last left in. */
const RAN_PUPPET: ReadonlySet<string> = new Set(['succeeded', 'failed', 'error', 'interrupted'])

/**
 * The run that left the system as this one found it: the newest other run, without
 * --noop, that ran Puppet (a skip or a refusal changed nothing; a noop run changed
 * nothing either, and its fingerprint is never a real run's).
 */
export function baselineRun(records: RunRecord[], runId: string): RunRecord | null {
  return newestRecord(records, (record) => record.id !== runId && !record.noop && RAN_PUPPET.has(record.state))
}

/**
 * This run's drift: how many resources it corrected, and which. Only a run without --noop
 * whose fingerprint equals its baseline's, which succeeded, can correct anything: every
 * change it made is something that changed on the system since. Any other run (the first,
 * one after a failure or a change of release, input, facts or options) corrects nothing
 * by this definition: its changes are the catalog's. Unknown (no count) when Puppet's
 * report of the run cannot be read.
 */
export async function correctiveChanges(
  run: {id: string; noop: boolean; fingerprint: string | null; resources: ResourceCounts | null | undefined; report: string},
  records: RunRecord[],
): Promise<{count: number | undefined; corrected: Corrected | null}> {
  const baseline = run.noop || !run.resources ? null : baselineRun(records, run.id)
  if (run.noop || !run.resources || run.fingerprint === null || baseline?.state !== 'succeeded' || baseline.fingerprint !== run.fingerprint) {
    return {count: run.noop || !run.resources ? undefined : 0, corrected: null}
  }

  if (run.resources.changed === 0) return {count: 0, corrected: null}
  const changed = await readChangedResources(run.report)
  if (changed === null) return {count: undefined, corrected: null}
  const resources = changed.slice(0, MAX_CORRECTED_NAMES).map((name) => (name.length > MAX_NAME_CHARS ? `${name.slice(0, MAX_NAME_CHARS)}…` : name))
  return {count: changed.length, corrected: changed.length > 0 ? {since: baseline.id, resources} : null}
}
