import {Flags} from '@oclif/core'

import {BaseCommand, describeWithExitCodes} from '../cli/base-command.js'
import {inputArgs, metricsFlags, runFlags} from '../cli/flags.js'
import {LocalpuppetError} from '../lib/errors.js'
import {APPLY_EXIT_CODES, ExitCode} from '../lib/exit-codes.js'
import type {ApplyOptions} from '../lib/run/apply-run.js'
import {DEFAULT_MAX_AGE} from '../lib/run/defaults.js'
import type {RunFetch, RunPlan} from '../lib/run/run-plan.js'
import type {AttemptContext} from '../lib/run/refusal.js'
import type {RunRecord} from '../lib/state/run-record.js'
import {defaultStateDir} from '../lib/state/state-dir.js'
import {type RunFlagValues, resolvePuppetArgs} from '../cli/run-options.js'

/** The flags of a run: apply's, and rollback's (which is apply --replay of a run it picks). */
export const attemptFlags = {
  ...runFlags,
  ...metricsFlags,
  save: Flags.boolean({description: "make this run's release the node's: rewrite the input's app (atomically, nothing else in the file changes) once the run has started"}),
  detach: Flags.boolean({description: 'check what can fail fast, then run in the background: print the run id and exit 0 at once'}),
  'if-changed': Flags.boolean({description: "skip the run (state: skipped) when nothing changed since the newest succeeded run, and that run is younger than --max-age"}),
  'max-age': Flags.string({
    description: `with --if-changed: skip only while the newest succeeded run is younger than this (e.g. 90m, 6h, 1d; default ${DEFAULT_MAX_AGE}); after that a full run corrects any drift`,
    dependsOn: ['if-changed'],
    helpValue: 'DURATION',
  }),
  splay: Flags.integer({description: 'wait a random 0..SECONDS before taking the lock, so a fleet on a timer does not stampede', min: 0, helpValue: 'SECONDS'}),
  'on-finish': Flags.string({description: 'once the run record is final (refused attempts too), run CMD with /bin/sh: the record as JSON on stdin (a file: /dev/stdin works), LOCALPUPPET_RUN_ID and LOCALPUPPET_RUN_STATE set', helpValue: 'CMD'}),
  keep: Flags.integer({description: 'run directories to keep (the newest; a running one is never removed)', min: 1, default: 100, helpValue: 'N'}),
  'detached-child': Flags.boolean({hidden: true, description: 'internal: the background half of --detach'}),
}

const applyFlags = {
  ...attemptFlags,
  app: Flags.string({description: "apply this release instead of the input's app, for this run (with --save: from now on)", helpValue: 'REF', exclusive: ['replay']}),
  replay: Flags.string({description: 'apply exactly what run RUN_ID applied: its release, ENC document, facts, manifest and puppet arguments', helpValue: 'RUN_ID'}),
}

export type AttemptFlagValues = RunFlagValues & {
  'if-changed': boolean
  'max-age'?: string
  splay?: number
  'on-finish'?: string
  keep: number
  save: boolean
  detach: boolean
  'metrics-file'?: string
  app?: string
  replay?: string
}

/** apply and rollback: one attempt to run, recorded whatever its outcome. */
export abstract class AttemptCommand extends BaseCommand {
  /** The input's text as read, handed to the background half of --detach. */
  protected inputText?: string
  /** --allow-untrusted: what it let through before the plan (the input file, an unsigned repository's place), passed on to the background half for its record. */
  protected untrustedBefore: string[] = []
  /** What --fetch brought (done here, in the caller, even with --detach: a failure is reported at once). */
  protected fetched: {fetched: RunFetch; release: string} | null = null

  /**
   * One attempt, from a parsed command line to its record: whatever happens past argument
   * parsing leaves a record (refused, busy, or the run's own), is counted, and rewrites the
   * metrics file.
   */
  protected async attempt(inputPath: string, flags: AttemptFlagValues, announce?: (plan: RunPlan) => void): Promise<RunRecord> {
    const [{parseFacts}, {newRunId}, {parseDuration}] = await Promise.all([
      import('../lib/run/run-plan.js'),
      import('../lib/state/run-id.js'),
      import('../lib/util/duration.js'),
    ])
    this.passThrough = await resolvePuppetArgs(this.passThrough)
    // Usage errors first: they are the command line's, not an attempt.
    const facts = parseFacts(flags.fact ?? [])
    const maxAgeMs = flags['max-age'] === undefined ? undefined : parseDuration(flags['max-age'], '--max-age')
    if (flags.save && inputPath === '-') {
      const {assertSavable} = await import('../lib/input/save-app.js')
      await assertSavable(inputPath)
    }

    const stateDir = flags['state-dir'] ?? defaultStateDir()
    const context: AttemptContext = {
      stateDir,
      runId: newRunId(),
      startedAt: new Date(),
      ref: flags.app ?? null,
      source: inputPath === '-' ? '<stdin>' : inputPath,
      noop: flags.noop,
      allowMutable: flags['allow-mutable'],
      facts,
      puppetArgs: this.passThrough,
      replayOf: flags.replay ?? null,
      allowUntrusted: flags['allow-untrusted'],
    }
    let record: RunRecord | null = null
    try {
      const plan = await this.planAttempt(inputPath, flags, facts, context)
      announce?.(plan)
      record = flags.detach ? await this.startInBackground(plan, flags, context) : await this.runInForeground(plan, flags, inputPath, maxAgeMs)
      return record
    } catch (error) {
      if (error instanceof LocalpuppetError && error.exitCode !== ExitCode.usage && !(error as {recorded?: boolean}).recorded) {
        record = await this.recordRefusal(error, context, flags)
      }

      throw error
    } finally {
      await this.afterAttempt(stateDir, record, flags)
    }
  }

  /** The plan of this attempt: the input (or the replayed run), --app, the release, verified. */
  private async planAttempt(inputPath: string, flags: AttemptFlagValues, facts: Record<string, string>, context: AttemptContext): Promise<RunPlan> {
    const {toPlanOptions} = await import('../cli/run-options.js')
    const json = this.jsonEnabled()
    const color = Boolean(process.stdout.isTTY) && !json && !flags.detach
    if (flags.save) {
      const {assertSavable} = await import('../lib/input/save-app.js')
      await assertSavable(inputPath)
    }

    if (flags.replay) {
      const [{buildReplayPlan}, {assertRunId}] = await Promise.all([import('../lib/run/replay.js'), import('../lib/state/run-id.js')])
      return (context.plan = await buildReplayPlan(assertRunId(flags.replay), toPlanOptions(flags, this.passThrough, facts, color), context.runId))
    }

    const [{readInputText}, {parseNodeInput}, {buildRunPlan}, {parseReleaseRef}] = await Promise.all([
      import('../lib/input/read-input.js'),
      import('../lib/input/node-input.js'),
      import('../lib/run/run-plan.js'),
      import('../lib/release/release-ref.js'),
    ])
    // Root applies what the input says: one others can write is refused (77) before it is read.
    const {text, source, untrusted} = await readInputText(inputPath, process.stdin, {allow: Boolean(flags['allow-untrusted'])})
    this.inputText = text
    this.untrustedBefore = [...untrusted]
    context.input = parseNodeInput(text, source)
    if (flags.app !== undefined) context.input = {...context.input, app: parseReleaseRef(flags.app, '--app')}
    if (flags.fetch) {
      const {fetchForRun} = await import('../cli/fetch-options.js')
      const result = await fetchForRun(context.input, flags, json)
      this.fetched = {fetched: result.fetched, release: result.release}
      this.untrustedBefore.push(...result.untrusted)
      context.input = result.input
    }

    const options = {...toPlanOptions(flags, this.passThrough, facts, color, this.fetched?.fetched), untrusted: this.untrustedBefore}
    return (context.plan = await buildRunPlan(context.input, options, context.runId))
  }

  private async startInBackground(plan: RunPlan, flags: AttemptFlagValues, context: AttemptContext): Promise<RunRecord> {
    const [{preflight}, {startDetached}] = await Promise.all([import('../lib/run/apply-run.js'), import('../lib/run/detach.js')])
    await preflight(plan, {checkLock: true})
    const {detach: _detach, json: _json, ...rest} = flags as AttemptFlagValues & {json?: boolean}
    const inputText = this.inputText ?? ''
    const reply = await startDetached(`${this.config.root}/bin/run.js`, {
      inputText,
      source: context.input?.source ?? context.source ?? '-',
      runId: plan.runId,
      flags: {...rest, 'input-path': context.source, 'untrusted-before': this.untrustedBefore, ...(this.fetched ? {fetch: false, fetched: this.fetched.fetched, 'fetched-release': this.fetched.release} : {})},
      puppetArgs: this.passThrough,
    })
    if (reply.type === 'error') {
      const error = new LocalpuppetError(reply.error.code, reply.error.exitCode, reply.error.message, reply.error.suggestions)
      // The background half recorded it already.
      Object.assign(error, {recorded: reply.recorded ?? false})
      throw error
    }

    if (!this.jsonEnabled()) {
      this.warnLines(plan.warnings)
      this.log(reply.record.id)
      process.stderr.write(`localpuppet: run ${reply.record.id} of ${reply.record.release} started in the background; localpuppet status ${reply.record.id} --wait\n`)
    }

    return reply.record
  }

  private async runInForeground(plan: RunPlan, flags: AttemptFlagValues, inputPath: string, maxAgeMs: number | undefined): Promise<RunRecord> {
    const json = this.jsonEnabled()
    const {applyPlan} = await import('../lib/run/apply-run.js')
    const {renderRunOutcome} = await import('../cli/render/run-text.js')
    return this.withSignals(async (signal) => {
      const outcome = await applyPlan(plan, {
        ...(await applyOptions(flags, inputPath, maxAgeMs)),
        signal,
        onOutput: json ? undefined : (chunk, stream) => process[stream].write(chunk),
        onStart: json
          ? undefined
          : (record) => {
              this.warnLines(plan.warnings)
              process.stderr.write(`localpuppet: run ${record.id}: ${record.release}${record.splaySeconds ? ` (splay: waiting ${record.splaySeconds}s)` : ''}\n`)
            },
      })
      if (!json) process.stderr.write(renderRunOutcome(outcome.record) + '\n')
      process.exitCode = outcome.exitCode
      return outcome.record
    })
  }

  private async recordRefusal(error: LocalpuppetError, context: AttemptContext, flags: AttemptFlagValues): Promise<RunRecord | null> {
    const [{recordRefusal}, {runFinishHook}, {runFiles}] = await Promise.all([
      import('../lib/run/refusal.js'),
      import('../lib/run/finish-hook.js'),
      import('../lib/state/state-dir.js'),
    ])
    // No state directory to write to: the error itself is all there is.
    const record = await recordRefusal(error, context).catch(() => null)
    if (record && record.state !== 'busy' && flags['on-finish']) {
      const files = runFiles(context.stateDir, record.id)
      await this.withSignals((signal) => runFinishHook(flags['on-finish']!, record, {log: files.log, recordFile: files.record, signal}))
    }

    return record
  }

  private async afterAttempt(stateDir: string, record: RunRecord | null, flags: AttemptFlagValues): Promise<void> {
    const {afterAttempt} = await import('../lib/metrics/attempt-metrics.js')
    const warning = await afterAttempt(stateDir, record, {metricsFile: flags['metrics-file'], puppet: flags.puppet, puppetArgs: this.passThrough})
    if (warning) this.warnLines([warning])
  }

  /** The background half of --detach: takes its orders over IPC, replies once the run has started. */
  protected async runDetachedChild(): Promise<RunRecord> {
    const [{receivePayload, replyToParent}, {parseNodeInput}, {buildRunPlan, parseFacts}, {applyPlan}, {toPlanOptions}, {buildReplayPlan}, {parseReleaseRef}, {pinInput}] = await Promise.all([
      import('../lib/run/detach.js'),
      import('../lib/input/node-input.js'),
      import('../lib/run/run-plan.js'),
      import('../lib/run/apply-run.js'),
      import('../cli/run-options.js'),
      import('../lib/run/replay.js'),
      import('../lib/release/release-ref.js'),
      import('../cli/fetch-options.js'),
    ])
    const payload = await receivePayload()
    this.passThrough = payload.puppetArgs
    const flags = payload.flags as unknown as AttemptFlagValues & {'input-path'?: string; 'untrusted-before'?: string[]; fetched?: RunFetch; 'fetched-release'?: string}
    const facts = parseFacts(flags.fact ?? [])
    const stateDir = flags['state-dir'] ?? defaultStateDir()
    const context: AttemptContext = {stateDir, runId: payload.runId, startedAt: new Date(), source: payload.source, noop: flags.noop, facts, puppetArgs: payload.puppetArgs}
    let replied = false
    let record: RunRecord | null = null
    try {
      const options = toPlanOptions(flags, payload.puppetArgs, facts, false, flags.fetched)
      let plan: RunPlan
      if (flags.replay) {
        plan = await buildReplayPlan(flags.replay, options, payload.runId)
      } else {
        context.input = parseNodeInput(payload.inputText, payload.source)
        if (flags.app !== undefined) context.input = {...context.input, app: parseReleaseRef(flags.app, '--app')}
        context.input = await pinInput(context.input, flags['fetched-release'])
        plan = await buildRunPlan(context.input, {...options, untrusted: flags['untrusted-before'] ?? []}, payload.runId)
      }

      context.plan = plan
      const {parseDuration} = await import('../lib/util/duration.js')
      const maxAgeMs = flags['max-age'] === undefined ? undefined : parseDuration(flags['max-age'], '--max-age')
      record = await this.withSignals(async (signal) => {
        const outcome = await applyPlan(plan, {
          ...(await applyOptions(flags, flags['input-path'] ?? '-', maxAgeMs)),
          signal,
          onStart: (started) => {
            replied = true
            replyToParent({type: 'started', record: started}).catch(() => {})
          },
        })
        process.exitCode = outcome.exitCode
        return outcome.record
      })
      return record
    } catch (error) {
      if (!replied) {
        if (error instanceof LocalpuppetError) record = await this.recordRefusal(error, context, flags)
        const known = error instanceof LocalpuppetError ? error.toJSON() : {code: 'internal', exitCode: 70, message: (error as Error).message}
        await replyToParent({type: 'error', error: known, recorded: record !== null})
      }

      throw error
    } finally {
      await this.afterAttempt(stateDir, record, flags)
    }
  }

  /** SIGINT, SIGTERM and SIGHUP stop the run (and puppet) instead of the process. */
  private async withSignals<T>(fn: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const controller = new AbortController()
    const signals: NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP']
    const onSignal = (signal: NodeJS.Signals) => controller.abort(signal)
    for (const signal of signals) process.on(signal, onSignal)
    try {
      return await fn(controller.signal)
    } finally {
      for (const signal of signals) process.off(signal, onSignal)
    }
  }
}

export default class Apply extends AttemptCommand {
  static override summary = 'Resolve the release named in the input and run puppet apply on it.'
  static override description = describeWithExitCodes(
    'Resolves the input\'s app to a release under the module directory, builds its modulepath from manifest.yaml, ' +
      'verifies installed tags, writes an exec ENC script for the input (minus app), runs the real `puppet apply`, ' +
      'streams its output and records the run (see `localpuppet status` and `localpuppet log`). Arguments after `--` ' +
      'go to puppet as they are. Every attempt past argument parsing is recorded: one refused before puppet ran ' +
      '(state: refused, with its error and exit code), and one that found another run in progress (state: busy, 73), ' +
      'which never displaces that run or the last result from `status`.',
    APPLY_EXIT_CODES,
  )

  static override usage = '<%= command.id %> [INPUT] [FLAGS] [-- PUPPET_ARGS...]'

  static override examples = [
    '<%= config.bin %> apply',
    '<%= config.bin %> apply /etc/puppet/input.yaml --noop',
    '<%= config.bin %> apply --fact lifecycle_stage=bootstrap --timeout 1800',
    '<%= config.bin %> apply --detach --if-changed --max-age 6h --splay 300',
    '<%= config.bin %> apply --app web/tags/2.0.0 --save',
    '<%= config.bin %> apply --replay 20261122T091631.123Z-4f2a',
    '<%= config.bin %> apply --metrics-file /var/lib/prometheus/node-exporter/localpuppet.prom',
    '<%= config.bin %> apply - --json < input.yaml',
    '<%= config.bin %> apply -- --debug',
  ]

  static override args = inputArgs

  static override flags = applyFlags


  async run(): Promise<RunRecord> {
    this.splitPassThrough()
    const {args, flags} = await this.parse(Apply)
    if (flags['detached-child']) return this.runDetachedChild()
    return this.attempt(args.input, flags)
  }
}

async function applyOptions(flags: AttemptFlagValues, inputPath: string, maxAgeMs: number | undefined): Promise<ApplyOptions> {
  const options: ApplyOptions = {ifChanged: flags['if-changed'], maxAgeMs, splaySeconds: flags.splay, onFinish: flags['on-finish'], keep: flags.keep}
  if (flags.save) {
    const {saveInputApp} = await import('../lib/input/save-app.js')
    options.save = (release) => saveInputApp(inputPath, release)
  }

  return options
}
