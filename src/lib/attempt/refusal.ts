import {appendFile, mkdir} from 'node:fs/promises'

import {InterruptedError, type LocalpuppetError, LockHeldError} from '../errors.js'
import type {NodeInput} from '../input/node-input.js'
import {type RunRecord, newRunRecord, writeRunRecord} from '../state/run-record.js'
import {runFiles} from '../state/state-dir.js'
import {withStopSignals} from '../util/on-stop.js'
import {findTrustProblem} from '../util/trusted-path.js'
import {recordedPuppet} from '../puppet/puppet-identity.js'
import {planRecord} from '../run/apply-run.js'
import {runFinishHook} from '../run/finish-hook.js'
import type {RunPlan} from '../run/run-plan.js'

/** What an attempt knew when it was refused: as much as it got to. */
export interface AttemptContext {
  stateDir: string
  runId: string
  startedAt: Date
  plan?: RunPlan
  input?: NodeInput
  /** --app, or the input's app once read. */
  ref?: string | null
  source?: string
  noop?: boolean
  allowMutable?: boolean
  facts?: Record<string, string>
  puppetArgs?: string[]
  replayOf?: string | null
  /** --allow-untrusted: the user accepted an untrusted state directory. */
  allowUntrusted?: boolean
  /** The puppet setting, for the record's `puppet` when no plan was made. */
  puppet?: string
}

/**
 * Records an attempt that ended before puppet ran: `busy` when another run was in progress
 * (a lock, 73), else `refused`, with the error and its exit code, and a one-line log, so
 * `status`, `history`, metrics and the finish hook all see it. Null when the state directory
 * is not trusted (and --allow-untrusted was not given): the error is then all there is.
 */
export async function recordRefusal(error: LocalpuppetError, context: AttemptContext): Promise<RunRecord | null> {
  // Nothing is written into a state directory that others could have planted things in.
  if (!context.allowUntrusted && findTrustProblem(context.stateDir, {what: 'state directory'})) return null
  const files = runFiles(context.stateDir, context.runId)
  const finished = new Date()
  const state = error instanceof LockHeldError ? 'busy' : error instanceof InterruptedError ? 'interrupted' : 'refused'
  const base: RunRecord = context.plan
    ? planRecord(context.plan, context.startedAt)
    : newRunRecord(context.runId, files.log, context.startedAt, {
        ref: context.ref ?? context.input?.app.text ?? null,
        input: {source: context.input?.source ?? context.source ?? '-', document: context.input?.raw ?? {}},
        inputDigest: context.input?.digest ?? '',
        noop: Boolean(context.noop),
        allowMutable: Boolean(context.allowMutable),
        facts: context.facts ?? {},
        environment: context.input?.environment ?? 'production',
        puppetArgs: context.puppetArgs ?? [],
        replayOf: context.replayOf ?? null,
        puppet: context.puppet === undefined ? null : recordedPuppet(context.puppet),
      })
  const record: RunRecord = {
    ...base,
    state,
    exitCode: error.exitCode,
    error: error.message,
    finishedAt: finished.toISOString(),
    durationMs: finished.getTime() - context.startedAt.getTime(),
  }
  await mkdir(files.dir, {recursive: true, mode: 0o700})
  await appendFile(files.log, `localpuppet: run ${record.id}: ${state}: ${error.message}\n`, {mode: 0o600})
  await writeRunRecord(context.stateDir, record)
  return record
}

/**
 * An attempt refused: recorded (see recordRefusal), then the finish hook told, unless it
 * was busy (the run in progress will tell it). Null when there was nowhere to record it.
 */
export async function refuseAttempt(error: LocalpuppetError, context: AttemptContext, onFinish?: string): Promise<RunRecord | null> {
  // No state directory to write to: the error itself is all there is.
  const record = await recordRefusal(error, context).catch(() => null)
  if (record && record.state !== 'busy' && onFinish) {
    const files = runFiles(context.stateDir, record.id)
    await withStopSignals((signal) => runFinishHook(onFinish, record, {log: files.log, recordFile: files.record, signal}))
  }

  return record
}
