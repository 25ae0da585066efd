import {disabledState} from '../puppet/agent-lock.js'
import {readNodeState} from '../state/node-state.js'
import type {RunRecord} from '../state/run-record.js'
import type {NodeIdentity} from '../config/node-identity.js'
import {countAttempt, nodeMetrics, readAttemptCounts, writeMetricsFile} from './node-metrics.js'

export interface AfterAttemptOptions {
  /** --metrics-file: where to write Prometheus' text format; nothing is written when absent. */
  metricsFile?: string
  puppet: string
  puppetArgs: string[]
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
  if (!options.metricsFile) return null
  try {
    const [state, counts, disabled, node] = await Promise.all([readNodeState(stateDir), readAttemptCounts(stateDir), disabledState(options.puppet, options.puppetArgs, stateDir), identity()])
    await writeMetricsFile(options.metricsFile, nodeMetrics(state, counts, disabled, node))
    return null
  } catch (error) {
    return `could not write metrics to ${options.metricsFile}: ${(error as Error).message}`
  }
}
