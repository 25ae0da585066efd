import {Flags} from '@oclif/core'

import {AttemptCommand} from '../cli/attempt-command.js'
import {describeWithExitCodes} from '../cli/base-command.js'
import {attemptFlags, inputArgs} from '../cli/flags.js'
import {APPLY_EXIT_CODES} from '../lib/exit-codes.js'
import type {RunRecord} from '../lib/state/run-record.js'

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

  static override flags = {
    ...attemptFlags,
    app: Flags.string({description: "apply this release instead of the input's app, for this run (with --save: from now on)", helpValue: 'REF', exclusive: ['replay']}),
    replay: Flags.string({description: 'apply exactly what run RUN_ID applied: its release, ENC document, facts, manifest and puppet arguments', helpValue: 'RUN_ID'}),
  }

  async run(): Promise<RunRecord> {
    this.splitPassThrough()
    const {args, flags} = await this.parse(Apply)
    if (flags['detached-child']) return this.runInBackground()
    return this.runAttempt(args.input, flags)
  }
}
