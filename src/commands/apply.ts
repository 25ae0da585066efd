import {Flags} from '@oclif/core'

import {BaseCommand, describeWithExitCodes} from '../base-command.js'
import {inputArgs, runFlags} from '../flags.js'
import {LocalpuppetError} from '../lib/errors.js'
import {APPLY_EXIT_CODES} from '../lib/exit-codes.js'
import type {ApplyOptions} from '../lib/run/apply-run.js'
import type {RunFetch} from '../lib/run/run-plan.js'
import type {RunRecord} from '../lib/state/run-record.js'
import {type RunFlagValues, resolvePuppetArgs} from '../run-options.js'

const applyFlags = {
  ...runFlags,
  detach: Flags.boolean({description: 'check what can fail fast, then run in the background: print the run id and exit 0 at once'}),
  'if-changed': Flags.boolean({description: "skip the run (state: skipped) when nothing changed since the newest succeeded run"}),
  splay: Flags.integer({description: 'wait a random 0..SECONDS before taking the lock, so a fleet on a timer does not stampede', min: 0, helpValue: 'SECONDS'}),
  'on-finish': Flags.string({description: 'once the run record is final, run CMD with /bin/sh: the record as JSON on stdin, LOCALPUPPET_RUN_ID and LOCALPUPPET_RUN_STATE set', helpValue: 'CMD'}),
  keep: Flags.integer({description: 'run directories to keep (the newest; a running one is never removed)', min: 1, default: 100, helpValue: 'N'}),
  'detached-child': Flags.boolean({hidden: true, description: 'internal: the background half of --detach'}),
}

type ApplyFlagValues = RunFlagValues & {'if-changed': boolean; splay?: number; 'on-finish'?: string; keep: number}

export default class Apply extends BaseCommand {
  static override summary = 'Resolve the release named in the input and run puppet apply on it.'
  static override description = describeWithExitCodes(
    'Resolves the input\'s app to a release under the module directory, builds its modulepath from manifest.yaml, ' +
      'verifies installed tags, writes an exec ENC script for the input (minus app), runs the real `puppet apply`, ' +
      'streams its output and records the run (see `localpuppet status` and `localpuppet log`). Arguments after `--` ' +
      'go to puppet as they are.',
    APPLY_EXIT_CODES,
  )

  static override usage = '<%= command.id %> [INPUT] [FLAGS] [-- PUPPET_ARGS...]'

  static override examples = [
    '<%= config.bin %> apply',
    '<%= config.bin %> apply /etc/puppet/input.yaml --noop',
    '<%= config.bin %> apply --fact lifecycle_stage=bootstrap --timeout 1800',
    '<%= config.bin %> apply --detach --if-changed --splay 300',
    '<%= config.bin %> apply - --json < input.yaml',
    '<%= config.bin %> apply -- --debug',
  ]

  static override args = inputArgs

  static override flags = applyFlags

  async run(): Promise<RunRecord> {
    this.splitPassThrough()
    const {args, flags} = await this.parse(Apply)
    this.passThrough = await resolvePuppetArgs(this.passThrough)
    if (flags['detached-child']) return this.runDetachedChild()
    const [{readInputText}, {parseNodeInput}, {buildRunPlan, parseFacts}, {newRunId}, {toPlanOptions}, {fetchForRun}] = await Promise.all([
      import('../lib/input/read-input.js'),
      import('../lib/input/node-input.js'),
      import('../lib/run/run-plan.js'),
      import('../lib/state/run-id.js'),
      import('../run-options.js'),
      import('../fetch-options.js'),
    ])
    const json = this.jsonEnabled()
    const facts = parseFacts(flags.fact ?? [])
    const {text, source} = await readInputText(args.input)
    let input = parseNodeInput(text, source)
    // --fetch happens here, in the caller, even with --detach: a failure is reported at once.
    let fetched: {fetched: RunFetch; release: string} | null = null
    if (flags.fetch) {
      const result = await fetchForRun(input, flags, json)
      input = result.input
      fetched = result
    }

    const color = Boolean(process.stdout.isTTY) && !json && !flags.detach
    const plan = await buildRunPlan(input, toPlanOptions(flags, this.passThrough, facts, color, fetched?.fetched), newRunId())

    if (flags.detach) {
      const [{preflight}, {startDetached}] = await Promise.all([import('../lib/run/apply-run.js'), import('../lib/run/detach.js')])
      await preflight(plan, {checkLock: true})
      const {detach: _detach, json: _json, ...rest} = flags
      const childFlags = fetched ? {...rest, fetch: false, fetched: fetched.fetched, 'fetched-release': fetched.release} : rest
      const reply = await startDetached(`${this.config.root}/bin/run.js`, {inputText: text, source, runId: plan.runId, flags: childFlags, puppetArgs: this.passThrough})
      if (reply.type === 'error') throw new LocalpuppetError(reply.error.code, reply.error.exitCode, reply.error.message, reply.error.suggestions)
      if (!json) {
        for (const warning of plan.warnings) process.stderr.write(`localpuppet: warning: ${warning}\n`)
        this.log(reply.record.id)
        process.stderr.write(`localpuppet: run ${reply.record.id} of ${reply.record.release} started in the background; localpuppet status ${reply.record.id} --wait\n`)
      }

      return reply.record
    }

    const {applyPlan} = await import('../lib/run/apply-run.js')
    const {renderRunOutcome} = await import('../render/run-text.js')
    return this.withSignals(async (signal) => {
      const outcome = await applyPlan(plan, {
        ...applyOptions(flags),
        signal,
        onOutput: json ? undefined : (chunk, stream) => process[stream].write(chunk),
        onStart: json
          ? undefined
          : (record) => {
              for (const warning of plan.warnings) process.stderr.write(`localpuppet: warning: ${warning}\n`)
              process.stderr.write(`localpuppet: run ${record.id}: ${record.release}${record.splaySeconds ? ` (splay: waiting ${record.splaySeconds}s)` : ''}\n`)
            },
      })
      if (!json) process.stderr.write(renderRunOutcome(outcome.record) + '\n')
      process.exitCode = outcome.exitCode
      return outcome.record
    })
  }

  /** The background half of --detach: takes its orders over IPC, replies once the run has started. */
  private async runDetachedChild(): Promise<RunRecord> {
    const [{receivePayload, replyToParent}, {parseNodeInput}, {buildRunPlan, parseFacts}, {applyPlan}, {toPlanOptions}, {pinInput}] = await Promise.all([
      import('../lib/run/detach.js'),
      import('../lib/input/node-input.js'),
      import('../lib/run/run-plan.js'),
      import('../lib/run/apply-run.js'),
      import('../run-options.js'),
      import('../fetch-options.js'),
    ])
    const payload = await receivePayload()
    let replied = false
    try {
      const flags = payload.flags as unknown as ApplyFlagValues & {fetched?: RunFetch; 'fetched-release'?: string}
      const input = await pinInput(parseNodeInput(payload.inputText, payload.source), flags['fetched-release'])
      const plan = await buildRunPlan(input, toPlanOptions(flags, payload.puppetArgs, parseFacts(flags.fact ?? []), false, flags.fetched), payload.runId)
      return await this.withSignals(async (signal) => {
        const outcome = await applyPlan(plan, {
          ...applyOptions(flags),
          signal,
          onStart: (record) => {
            replied = true
            replyToParent({type: 'started', record}).catch(() => {})
          },
        })
        process.exitCode = outcome.exitCode
        return outcome.record
      })
    } catch (error) {
      if (!replied) {
        const known = error instanceof LocalpuppetError ? error.toJSON() : {code: 'internal', exitCode: 70, message: (error as Error).message}
        await replyToParent({type: 'error', error: known})
      }

      throw error
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

function applyOptions(flags: Pick<ApplyFlagValues, 'if-changed' | 'splay' | 'on-finish' | 'keep'>): ApplyOptions {
  return {ifChanged: flags['if-changed'], splaySeconds: flags.splay, onFinish: flags['on-finish'], keep: flags.keep}
}
