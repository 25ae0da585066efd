import {disabledState} from '../puppet/agent-lock.js'
import {readNodeState} from '../state/node-state.js'
import type {RunRecord} from '../state/run-record.js'
import {countAttempt, nodeMetrics, readAttemptCounts, writeMetricsFile} from './node-metrics.js'

export interface AfterAttemptOptions {
  /** --metrics-file: where to write Prometheus' text format; nothing is written when absent. */
  metricsFile?: string
  puppet: string
  puppetArgs: string[]
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
    const [state, counts, disabled] = await Promise.all([readNodeState(stateDir), readAttemptCounts(stateDir), disabledState(options.puppet, options.puppetArgs, stateDir)])
    await writeMetricsFile(options.metricsFile, nodeMetrics(state, counts, disabled))
    return null
  } catch (error) {
    return `could not write metrics to ${options.metricsFile}: ${(error as Error).message}`
  }
}
