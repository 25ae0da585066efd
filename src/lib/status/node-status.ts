import {NotFoundError, UntrustedPathError} from '../errors.js'
import {ExitCode} from '../exit-codes.js'
import type {CheckResult} from '../metrics/nagios-check.js'
import {assertRunId} from '../state/run-id.js'
import {type RunRecord, readRunRecord, settledRecord} from '../state/run-record.js'
import {type Applied, appliedAndDrift} from '../state/applied.js'
import {assertTrustedStateDir} from '../state/state-dir.js'
import {isProcessAlive} from '../util/process.js'

/** status --json: the record's fields, plus what an operator polling a fleet needs to know. */
export type StatusResult = RunRecord & {
  /** The newest run that ran puppet or was skipped, when the record shown is not one (refused, running). */
  lastCompleted: RunRecord | null
  puppetDisabled: {message: string} | null
  /** The input's app: the node's release from now on. */
  pointer: string | null
  /** The newest run that succeeded without --noop: what the node has applied (a noop or failed run never counts). */
  applied: Applied['applied']
  /**
   * How far the node had drifted from its catalog, by the newest completed run that counted
   * resources: a noop run's out-of-sync count, or a real run's corrective changes.
   */
  drift: Applied['drift']
}

export interface StatusOptions {
  stateDir: string
  /** The run to show; absent: the run in progress, else the newest attempt. */
  runId?: string
  /** Wait while the run is running, for at most timeoutSeconds. */
  wait?: boolean
  timeoutSeconds?: number
  /** Puppet and its arguments: where its disable lock is. */
  puppet: string
  puppetArgs: string[]
  /** The input whose app is the node's release (the pointer). */
  input: string
  allowUntrusted?: boolean
  /** What --allow-untrusted let through (a state dir others can write), for a warning. */
  onUntrusted?(problems: string[]): void
}

/**
 * How the node is: the run asked for (or the one in progress, else the newest attempt),
 * settled (a running record whose process is gone is not running), with the last completed
 * run, whether Puppet is disabled and the input's app. A state dir others can write is
 * refused (77): a forged record must not be believed.
 */
export async function nodeStatus(options: StatusOptions): Promise<StatusResult> {
  const {stateDir} = options
  const [{readNodeState}, {disabledState}, {readPointer}] = await Promise.all([
    import('../state/node-state.js'),
    import('../puppet/puppet-locks.js'),
    import('../input/pointer.js'),
  ])
  options.onUntrusted?.(assertTrustedStateDir(stateDir, options.allowUntrusted))
  let node = await readNodeState(stateDir)
  let id: string
  if (options.runId === undefined) {
    if (!node.current) throw new NotFoundError(`no runs yet in ${stateDir}`)
    id = node.current.id
  } else {
    id = assertRunId(options.runId)
  }

  const read = async () => settledRecord(stateDir, await readRunRecord(stateDir, id), isProcessAlive)
  let record = await read()
  if (options.wait) {
    const until = options.timeoutSeconds === undefined ? Number.POSITIVE_INFINITY : Date.now() + options.timeoutSeconds * 1000
    while (record.state === 'running' && Date.now() < until) {
      await new Promise((resolve) => setTimeout(resolve, Math.min(250, Math.max(0, until - Date.now()))))
      record = await read()
    }

    // What the node did meanwhile: the wait may have lasted.
    node = await readNodeState(stateDir)
  }

  const [puppetDisabled, pointer] = await Promise.all([disabledState(options.puppet, options.puppetArgs, stateDir), readPointer(options.input)])
  const lastCompleted = node.lastCompleted && node.lastCompleted.id !== record.id ? node.lastCompleted : null
  return {...record, lastCompleted, puppetDisabled, pointer, ...appliedAndDrift(node.records)}
}

/** status --check, a Nagios/Icinga plugin: never throws; anything it cannot read is UNKNOWN (3), as plugins must. */
export async function checkStatus(options: Omit<StatusOptions, 'runId' | 'wait' | 'timeoutSeconds' | 'input'> & {warnMs: number; critMs: number}): Promise<CheckResult> {
  const {stateDir} = options
  const [{checkNode}, {readNodeState}, {disabledState}] = await Promise.all([
    import('../metrics/nagios-check.js'),
    import('../state/node-state.js'),
    import('../puppet/puppet-locks.js'),
  ])
  try {
    options.onUntrusted?.(assertTrustedStateDir(stateDir, options.allowUntrusted))
    const [node, disabled] = await Promise.all([readNodeState(stateDir), disabledState(options.puppet, options.puppetArgs, stateDir)])
    return checkNode(node, disabled, options.warnMs, options.critMs)
  } catch (error) {
    // An untrusted state dir names itself, its owner, mode and fix: that line as it is.
    const what = error instanceof UntrustedPathError ? '' : `cannot read ${stateDir}: `
    return {status: 'UNKNOWN', exitCode: 3, line: `LOCALPUPPET UNKNOWN - ${what}${(error as Error).message}`, ageSeconds: null}
  }
}

/** status's exit code for the run it shows: 0 succeeded or skipped, 75 running, 73 busy, 1 otherwise. */
export function statusExitCode(record: RunRecord): number {
  if (record.state === 'succeeded' || record.state === 'skipped') return ExitCode.ok
  if (record.state === 'running') return ExitCode.tempFail
  if (record.state === 'busy') return ExitCode.locked
  return ExitCode.failed
}
