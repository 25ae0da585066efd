import {type RunRecord, newestRecord} from '../state/run-record.js'
import {terminalText} from '../util/terminal-text.js'
import type {MetricFamily} from './prometheus.js'

/**
 * The longest first error line a metric carries (then `…`): the line that says why, not
 * Puppet's whole message; a label value stays small whatever Puppet said.
 */
export const MAX_FIRST_ERROR_CHARS = 300

const FAILING: ReadonlySet<string> = new Set(['failed', 'error', 'refused', 'interrupted'])

/**
 * Why the attempt failed, as one line: Puppet's own first `Error:` line when Puppet ran,
 * else localpuppet's error (a refusal's reason); empty when it did not fail. Control
 * characters shown escaped, cut at MAX_FIRST_ERROR_CHARS.
 */
export function firstErrorLine(record: Pick<RunRecord, 'state' | 'firstError' | 'error'>): string {
  if (!FAILING.has(record.state)) return ''
  return terminalText(record.firstError || record.error || '', MAX_FIRST_ERROR_CHARS)
}

/**
 * `localpuppet_last_attempt_info{run_id, first_error}`: one series per node, of the
 * newest finished attempt (the one `localpuppet_last_attempt_exit_code` is of), replaced
 * by the next. Its labels change with every attempt: one new series per run and node,
 * each alive until the next run (what a build's info series does at every deploy), never
 * more at once.
 */
export function lastAttemptInfo(records: RunRecord[]): MetricFamily {
  const last = newestRecord(records, (record) => record.exitCode !== null)
  return {
    name: 'localpuppet_last_attempt_info',
    help: `The newest finished attempt (of localpuppet_last_attempt_exit_code): its run id, and why it failed in one line of at most ${MAX_FIRST_ERROR_CHARS} characters (Puppet's first Error: line, else localpuppet's error; empty when it did not fail); always 1.`,
    type: 'gauge',
    samples: last ? [{labels: {run_id: last.id, first_error: firstErrorLine(last)}, value: 1}] : [],
  }
}
