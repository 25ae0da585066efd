import {LocalpuppetError} from '../errors.js'
import {ExitCode} from '../exit-codes.js'
import {afterAttempt, assertTrustedMetricsFile} from '../metrics/attempt-metrics.js'
import {applyPlan, preflight} from '../run/apply-run.js'
import {type RunPlan, parseFacts} from '../run/run-plan.js'
import {newRunId} from '../state/run-id.js'
import type {RunRecord} from '../state/run-record.js'
import {parseDuration} from '../util/duration.js'
import {withStopSignals} from '../util/on-stop.js'
import {type AttemptOptions, applyOptions, assertAttemptUsage, assertSaveKeepsInput} from './options.js'
import {type PlanIo, type PlannedAttempt, planAttempt} from './plan-attempt.js'
import {type AttemptContext, refuseAttempt} from './refusal.js'

/** How an attempt talks to the person who started it; with --json only `warn` is given. */
export interface AttemptIo extends PlanIo {
  /** The CLI entry point the background half of --detach is started with (`node ENTRY apply --detached-child`). */
  entry: string
  /** The plan, before anything runs. */
  planned?(plan: RunPlan): void
  /** The run's record exists (state: running): in the foreground, or started in the background. */
  started?(record: RunRecord, plan: RunPlan, how: {detached: boolean}): void
  /** Puppet's output, as it writes it. */
  output?(chunk: Buffer, stream: 'stdout' | 'stderr'): void
  /** A run in the foreground ended: its final record. */
  finished?(record: RunRecord): void
  /** A warning that is not the attempt's outcome (the metrics file could not be written). */
  warn(line: string): void
}

export interface AttemptResult {
  /** The final record; `running` when the run went on in the background. */
  record: RunRecord
  /** What the process should exit with. */
  exitCode: number
}

/**
 * One attempt to apply `input` (a file, or `-` for standard input), from parsed options to
 * its record, for apply and rollback (and a rollout's local side): what to apply is the
 * input, how is the options. Whatever happens past the usage checks leaves a record (refused, busy, or
 * the run's own), is counted, rewrites the metrics file, and tells the finish hook.
 * Throws the LocalpuppetError that refused it, once recorded.
 */
export async function attempt(input: string, options: AttemptOptions, io: AttemptIo): Promise<AttemptResult> {
  // Usage errors first: they are the command line's, not an attempt.
  const facts = parseFacts(options.facts)
  const maxAgeMs = options.maxAge === undefined ? undefined : parseDuration(options.maxAge, '--max-age')
  assertAttemptUsage(options)
  await assertSaveKeepsInput(options)
  if (options.save && input === '-') await assertSavable(input)
  const context: AttemptContext = {
    stateDir: options.stateDir,
    runId: newRunId(),
    startedAt: new Date(),
    ref: options.app ?? null,
    source: input === '-' ? '<stdin>' : input,
    noop: options.noop,
    allowMutable: options.allowMutable,
    facts,
    puppetArgs: options.puppetArgs,
    replayOf: options.replay ?? null,
    allowUntrusted: options.allowUntrusted,
    puppet: options.puppet,
  }
  let record: RunRecord | null = null
  try {
    if (options.save) await assertSavable(input)
    const metricsUntrusted = await assertTrustedMetricsFile(options.metricsFile, options.allowUntrusted)
    const planned = await planAttempt(input, options, facts, io, context.runId, (parsed) => (context.input = parsed))
    planned.plan.untrusted.push(...metricsUntrusted.filter((line) => !planned.plan.untrusted.includes(line)))
    context.plan = planned.plan
    if (options.save) await assertAppEditable(input, planned, options, io)
    io.planned?.(planned.plan)
    const result = options.detach ? await startInBackground(input, planned, options, io, context) : await runInForeground(input, planned.plan, options, io, maxAgeMs)
    record = result.record
    return result
  } catch (error) {
    if (error instanceof LocalpuppetError && error.exitCode !== ExitCode.usage && !(error as {recorded?: boolean}).recorded) {
      record = await refuseAttempt(error, context, options.onFinish)
    }

    throw error
  } finally {
    const warning = await afterAttempt(options.stateDir, record, {metricsFile: options.metricsFile, puppet: options.puppet, puppetArgs: options.puppetArgs, allowUntrusted: options.allowUntrusted})
    if (warning) io.warn(warning)
    const sent = await sendToPuppetDb(options, record)
    if (sent) io.warn(sent)
  }
}

/** With the puppetdb setting: the attempt's report, facts and catalog, spooled and sent (never fails the attempt; a warning when they wait). */
export async function sendToPuppetDb(options: {stateDir: string; moduleDir: string}, record: RunRecord | null): Promise<string | null> {
  if (!record || record.state === 'running' || record.state === 'busy' || record.state === 'skipped') return null
  const {sendRunToPuppetDb} = await import('../puppetdb/after-run.js')
  return sendRunToPuppetDb(options.stateDir, options.moduleDir, record)
}

/** --save: refused for standard input (64), and before anything runs when the file cannot be rewritten. */
async function assertSavable(input: string): Promise<void> {
  const {assertSavable} = await import('../input/save-app.js')
  await assertSavable(input)
}

/**
 * --save rewrites the input only once the run succeeded: an `app` it could not rewrite
 * (an alias, a merge key) is refused now (65), before Puppet runs, not after.
 */
async function assertAppEditable(input: string, planned: PlannedAttempt, options: AttemptOptions, io: AttemptIo): Promise<void> {
  const [{setInputApp}, {readInputText}] = await Promise.all([import('../input/save-app.js'), import('../input/read-input.js')])
  // --replay and rollback did not read the input: read (and judge) it as apply would.
  const text = planned.inputText ?? (await readInputText(input, io.stdin, {allow: options.allowUntrusted})).text
  setInputApp(text, planned.plan.release, input)
}

async function runInForeground(input: string, plan: RunPlan, options: AttemptOptions, io: AttemptIo, maxAgeMs: number | undefined): Promise<AttemptResult> {
  return withStopSignals(async (signal) => {
    const outcome = await applyPlan(plan, {
      ...(await applyOptions(input, options, maxAgeMs)),
      signal,
      cliEntry: io.entry,
      onOutput: io.output,
      onStart: io.started ? (record) => io.started!(record, plan, {detached: false}) : undefined,
    })
    io.finished?.(outcome.record)
    return {record: outcome.record, exitCode: outcome.exitCode}
  })
}

/** --detach: what can fail fast is checked here (puppet, Puppet disabled, the lock); the run goes on in a process of its own. */
async function startInBackground(input: string, planned: PlannedAttempt, options: AttemptOptions, io: AttemptIo, context: AttemptContext): Promise<AttemptResult> {
  const {plan} = planned
  await preflight(plan, {checkLock: true})
  // execa (for the detached child's IPC) costs some 15 ms to load: only --detach pays it.
  const {startDetached} = await import('./detach.js')
  const reply = await startDetached(io.entry, {
    input,
    options: {...options, detach: false},
    inputText: planned.inputText ?? '',
    source: context.input?.source ?? context.source ?? '-',
    runId: plan.runId,
    untrustedBefore: planned.untrusted,
    fetched: planned.fetched,
  })
  if (reply.type === 'error') {
    const error = new LocalpuppetError(reply.error.code, reply.error.exitCode, reply.error.message, reply.error.suggestions)
    // The background half recorded it already.
    Object.assign(error, {recorded: reply.recorded ?? false})
    throw error
  }

  io.started?.(reply.record, plan, {detached: true})
  return {record: reply.record, exitCode: ExitCode.ok}
}
