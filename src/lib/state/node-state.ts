import {RunLock} from './lock.js'
import {COMPLETED_STATES, type RunRecord, newestRecord, readRunRecords} from './run-record.js'

/** What the state directory says about the node, read once. */
export interface NodeState {
  /**
   * What `status` with no run id describes: the run holding the lock (in progress), else
   * the newest attempt that ended, refused ones included. Busy attempts (another run was
   * in progress) never; a run still waiting out its splay only when there is nothing else.
   */
  current: RunRecord | null
  /** The newest run that ran puppet or was skipped: succeeded, failed, error, interrupted, skipped. */
  lastCompleted: RunRecord | null
  /** The newest run that succeeded (puppet ran; skipped runs are not counted). */
  lastSucceeded: RunRecord | null
  /** The newest attempt of any kind, busy ones included. */
  lastAttempt: RunRecord | null
  /** Every readable record, oldest first. */
  records: RunRecord[]
}

export async function readNodeState(stateDir: string): Promise<NodeState> {
  const records = await readRunRecords(stateDir)
  const holder = await RunLock.holder(stateDir).catch(() => null)
  const inProgress = holder?.runId ? records.find((record) => record.id === holder.runId && record.state === 'running') : undefined
  const ended = newestRecord(records, (record) => record.state !== 'running' && record.state !== 'busy')
  const waiting = newestRecord(records, (record) => record.state === 'running')
  return {
    current: inProgress ?? ended ?? waiting,
    lastCompleted: newestRecord(records, (record) => COMPLETED_STATES.includes(record.state)),
    lastSucceeded: newestRecord(records, (record) => record.state === 'succeeded'),
    lastAttempt: newestRecord(records, () => true),
    records,
  }
}
