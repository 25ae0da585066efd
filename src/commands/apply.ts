import {Args} from '@oclif/core'

import {BaseCommand, describeWithExitCodes} from '../base-command.js'
import {runFlags} from '../flags.js'
import {DEFAULT_INPUT} from '../lib/defaults.js'
import {APPLY_EXIT_CODES} from '../lib/exit-codes.js'
import type {RunRecord} from '../lib/state/run-record.js'

export default class Apply extends BaseCommand {
  static override summary = 'Resolve the release named in the input and run puppet apply on it.'
  static override description = describeWithExitCodes(
    'Resolves the input\'s app to a release under the module directory, builds its modulepath from manifest.yaml, ' +
      'writes an exec ENC script for the input (minus app), runs the real `puppet apply`, streams its output and records ' +
      'the run (see `localpuppet status` and `localpuppet log`). Arguments after `--` go to puppet as they are.',
    APPLY_EXIT_CODES,
  )

  static override usage = '<%= command.id %> [INPUT] [FLAGS] [-- PUPPET_ARGS...]'

  static override examples = [
    '<%= config.bin %> apply',
    '<%= config.bin %> apply /etc/puppet/input.yaml --noop',
    '<%= config.bin %> apply --fact lifecycle_stage=bootstrap --timeout 1800',
    '<%= config.bin %> apply - --json < input.yaml',
    '<%= config.bin %> apply -- --debug',
  ]

  static override args = {
    input: Args.string({description: 'the input YAML (ENC document plus app); - reads standard input', default: DEFAULT_INPUT}),
  }

  static override flags = runFlags

  async run(): Promise<RunRecord> {
    this.splitPassThrough()
    const {args, flags} = await this.parse(Apply)
    const [{readNodeInput}, {buildRunPlan, parseFacts}, {applyPlan}, {newRunId}, {toPlanOptions}, {renderRunOutcome}] = await Promise.all([
      import('../lib/input/read-input.js'),
      import('../lib/run/run-plan.js'),
      import('../lib/run/apply-run.js'),
      import('../lib/state/run-id.js'),
      import('../run-options.js'),
      import('../render/run-text.js'),
    ])
    const json = this.jsonEnabled()
    const facts = parseFacts(flags.fact ?? [])
    const input = await readNodeInput(args.input)
    const plan = await buildRunPlan(input, toPlanOptions(flags, this.passThrough, facts, Boolean(process.stdout.isTTY) && !this.jsonEnabled()), newRunId())

    const controller = new AbortController()
    const signals: NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP']
    const onSignal = (signal: NodeJS.Signals) => controller.abort(signal)
    for (const signal of signals) process.on(signal, onSignal)
    try {
      const outcome = await applyPlan(plan, {
        signal: controller.signal,
        onOutput: json ? undefined : (chunk, stream) => process[stream].write(chunk),
        onStart: json
          ? undefined
          : (record) => {
              for (const warning of plan.warnings) process.stderr.write(`localpuppet: warning: ${warning}\n`)
              process.stderr.write(`localpuppet: run ${record.id}: ${record.release}\n`)
            },
      })
      if (!json) process.stderr.write(renderRunOutcome(outcome.record) + '\n')
      process.exitCode = outcome.exitCode
      return outcome.record
    } finally {
      for (const signal of signals) process.off(signal, onSignal)
    }
  }
}
