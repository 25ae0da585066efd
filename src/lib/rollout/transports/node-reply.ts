import type {NodeReport, RunReport} from '../engine.js'

/**
 * One node's reply in the shape `mco rpc --json` prints it (the MCollective agent's status
 * action); the SSH transport builds the same shape from `localpuppet status --json`, so both
 * transports read a node alike.
 */
export interface NodeReply {
  sender: string
  statuscode: number
  statusmsg: string
  data: Record<string, unknown>
}

/** A reply field that is a non-empty string, else null. */
export const str = (value: unknown): string | null => (typeof value === 'string' && value !== '' ? value : null)
/** A reply field that is a finite number, else null. */
export const num = (value: unknown): number | null => (typeof value === 'number' && Number.isFinite(value) ? value : null)

/** A run as the agent's status action reports it. */
export function runFromReply(reply: NodeReply): RunReport | null {
  const {data} = reply
  const runId = str(data.run_id)
  const state = str(data.state)
  if (runId === null || state === null) return null
  const changed = num(data.changed)
  const failed = num(data.failed)
  const outOfSync = num(data.out_of_sync)
  return {
    runId,
    state,
    release: str(data.release),
    ref: str(data.ref),
    noop: data.noop === true,
    startedAt: str(data.started_at),
    durationMs: num(data.duration_ms),
    exitCode: num(data.exit_code),
    resources: changed === null && failed === null && outOfSync === null ? null : {changed: changed ?? 0, failed: failed ?? 0, outOfSync: outOfSync ?? 0},
    message: str(data.first_error) ?? str(data.error) ?? str(data.reason) ?? (reply.statuscode === 0 ? null : str(reply.statusmsg)),
  }
}

/** How a node is, from the agent's status action with no run id. */
export function nodeFromReply(reply: NodeReply): NodeReport {
  return {pointer: str(reply.data.pointer), applied: str(reply.data.applied), newest: runFromReply(reply), disabled: str(reply.data.puppet_disabled), drift: num(reply.data.drift)}
}
