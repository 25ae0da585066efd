import {dirname} from 'node:path'

import {disabledState} from '../puppet/puppet-locks.js'
import {readNodeState} from '../state/node-state.js'
import type {RunRecord} from '../state/run-record.js'
import type {NodeIdentity} from '../config/node-identity.js'
import {countAttempt, nodeMetrics, readAttemptCounts, writeMetricsFile} from './node-metrics.js'

export interface AfterAttemptOptions {
  /** --metrics-file: where to write Prometheus' text format; nothing is written when absent. */
  metricsFile?: string
  puppet: string
  puppetArgs: string[]
  /** --allow-untrusted: write the metrics file even where others could redirect the write. */
  allowUntrusted?: boolean
}

/** The node's name and where its input comes from, for the metrics (the settings; never fails the attempt). */
async function identity(): Promise<NodeIdentity | undefined> {
  const {nodeIdentity} = await import('../config/node-identity.js')
  return nodeIdentity().catch(() => undefined)
}

/**
 * After every attempt, whatever its outcome: count it by its final state and rewrite the
 * metrics file. A running record (apply --detach's caller) is counted by the run itself.
 * Never fails the attempt: a metrics file that cannot be written is a warning, returned.
 */
export async function afterAttempt(stateDir: string, record: RunRecord | null, options: AfterAttemptOptions): Promise<string | null> {
  if (record && record.state !== 'running') await countAttempt(stateDir, record.state).catch(() => {})
  return rewriteMetrics(stateDir, options, record?.error)
}

/**
 * --metrics-file is written by root: where another user owns or can write a directory
 * leading to it, they decide where that write lands (a link to /etc/cron.d). Refused (77)
 * before anything is done; --allow-untrusted writes it anyway (the problems, returned).
 */
export async function assertTrustedMetricsFile(metricsFile: string | undefined, allowUntrusted = false): Promise<string[]> {
  if (!metricsFile) return []
  const {assertTrustedPaths} = await import('../util/trusted-path.js')
  return assertTrustedPaths([{path: dirname(metricsFile), what: "metrics file's directory"}], allowUntrusted)
}

/**
 * disable and enable: Puppet's lock changes, and the metrics file says so at once, not at
 * the next run (the promote gate's `disabled`, the DisabledTooLong alert). The metrics
 * file's directory is judged first (77: nothing changed); a file that cannot be written
 * after is a warning, returned.
 */
export async function changeRunsLock<T extends {untrusted: string[]}>(change: () => Promise<T>, stateDir: string, options: AfterAttemptOptions): Promise<T & {metricsWarning: string | null}> {
  const untrusted = await assertTrustedMetricsFile(options.metricsFile, options.allowUntrusted)
  const state = await change()
  const metricsWarning = await rewriteMetrics(stateDir, options)
  return {...state, untrusted: [...state.untrusted, ...untrusted.filter((problem) => !state.untrusted.includes(problem))], metricsWarning}
}

/** Rewrites the metrics file from the node's state (nothing without one); a warning when it cannot. `refusedFor`: the error an attempt was refused for (not said twice). */
async function rewriteMetrics(stateDir: string, options: AfterAttemptOptions, refusedFor?: string | null): Promise<string | null> {
  if (!options.metricsFile) return null
  // Root writes it: in a directory another user owns (or could swap for a link), they
  // choose where. The attempt was refused for it already (77); nothing is written.
  const {findTrustProblem} = await import('../util/trusted-path.js')
  const problem = options.allowUntrusted ? null : findTrustProblem(dirname(options.metricsFile), {what: "metrics file's directory"})
  if (problem) return refusedFor === problem.message ? null : `not writing metrics: ${problem.message}`
  try {
    const [state, counts, disabled, node] = await Promise.all([readNodeState(stateDir), readAttemptCounts(stateDir), disabledState(options.puppet, options.puppetArgs, stateDir), identity()])
    await writeMetricsFile(options.metricsFile, nodeMetrics(state, counts, disabled, node))
    return null
  } catch (error) {
    return `could not write metrics to ${options.metricsFile}: ${(error as Error).message}`
  }
}
