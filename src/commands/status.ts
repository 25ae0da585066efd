import {Args, Flags} from '@oclif/core'

import {BaseCommand, describeWithExitCodes} from '../cli/base-command.js'
import {puppetFlags, stateFlags, trustFlags} from '../cli/flags.js'
import {shownMessage} from '../cli/render/message-text.js'
import {renderRunRecord} from '../cli/render/run-text.js'
import {resolvePuppetArgs} from '../cli/run-options.js'
import {settingString} from '../lib/config/settings.js'
import {STATUS_EXIT_CODES} from '../lib/exit-codes.js'
import {type CheckResult, DEFAULT_CHECK_CRIT, DEFAULT_CHECK_WARN} from '../lib/metrics/nagios-check.js'
import {defaultStateDir} from '../lib/state/state-dir.js'
import type {StatusResult} from '../lib/status/node-status.js'

export default class Status extends BaseCommand {
  static override allowUntrustedHint = 'or pass --allow-untrusted to read its records anyway (with a warning)'

  static override summary = 'Say how the node is: the run in progress or the last attempt (or the given run); --wait, --check.'
  static override description = describeWithExitCodes(
    'With no RUN_ID: the run in progress, else the newest attempt that ended (refused attempts included; an attempt that ' +
      'found another run in progress, state busy, never), and when that is not a completed run, the last completed one. ' +
      "Shows state, release, times, duration, exit codes, resource counts, log, whether Puppet is disabled and the input's app. " +
      '`--json` prints the run record plus lastCompleted, puppetDisabled and pointer. `--wait` blocks until the run finishes. ' +
      '`--check` is a Nagios/Icinga plugin: one line with perfdata, exit 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN.',
    STATUS_EXIT_CODES,
  )

  static override usage = '<%= command.id %> [RUN_ID] [FLAGS] [-- PUPPET_ARGS...]'

  static override examples = [
    '<%= config.bin %> status',
    '<%= config.bin %> status 20261122T091631.123Z-4f2a --json',
    '<%= config.bin %> status --wait --timeout 900',
    '<%= config.bin %> status --check --warn 2h --crit 6h',
  ]

  static override args = {
    runId: Args.string({name: 'RUN_ID', description: 'the run to show [default: the run in progress, else the newest attempt]'}),
  }

  static override flags = {
    ...stateFlags,
    ...trustFlags,
    wait: Flags.boolean({description: 'wait until the run is no longer running'}),
    timeout: Flags.integer({description: 'with --wait: give up after this many seconds (exit 75)', min: 1, dependsOn: ['wait'], helpValue: 'SECONDS'}),
    input: Flags.string({
      description: "the input whose app is the node's release (pointer) (env LOCALPUPPET_INPUT, config input)",
      default: async () => (await settingString('input')) as string,
      noCacheDefault: true,
      helpValue: 'FILE',
    }),
    ...puppetFlags,
    check: Flags.boolean({description: 'Nagios/Icinga plugin output: one line with perfdata; exit 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN', exclusive: ['wait']}),
    warn: Flags.string({description: `with --check: WARNING when the newest success is older than this [default: ${DEFAULT_CHECK_WARN}]`, dependsOn: ['check'], helpValue: 'AGE'}),
    crit: Flags.string({description: `with --check: CRITICAL when the newest success is older than this [default: ${DEFAULT_CHECK_CRIT}]`, dependsOn: ['check'], helpValue: 'AGE'}),
  }

  async run(): Promise<StatusResult | CheckResult> {
    this.splitPassThrough()
    const {args, flags} = await this.parse(Status)
    // Where Puppet keeps its disable lock: the puppet_args setting when nothing follows `--`.
    this.passThrough = await resolvePuppetArgs(this.passThrough)
    const [{checkStatus, nodeStatus, statusExitCode}, {parseDuration}] = await Promise.all([import('../lib/status/node-status.js'), import('../lib/util/duration.js')])
    const options = {
      stateDir: flags['state-dir'] ?? defaultStateDir(),
      puppet: flags.puppet,
      puppetArgs: this.passThrough,
      allowUntrusted: flags['allow-untrusted'],
      onUntrusted: (problems: string[]) => this.warnUntrusted(problems),
    }
    if (flags.check) {
      const [warnMs, critMs] = [parseDuration(flags.warn ?? DEFAULT_CHECK_WARN, '--warn'), parseDuration(flags.crit ?? DEFAULT_CHECK_CRIT, '--crit')]
      const result = await checkStatus({...options, warnMs, critMs})
      // One line, as a monitoring system reads it: a record's error (a server's words) cannot break it.
      if (!this.jsonEnabled()) this.log(shownMessage(result.line))
      process.exitCode = result.exitCode
      return result
    }

    const result = await nodeStatus({...options, runId: args.runId, wait: flags.wait, timeoutSeconds: flags.timeout, input: flags.input})
    if (!this.jsonEnabled()) this.log(renderRunRecord(result, {...result, pointerFile: flags.input}))
    process.exitCode = statusExitCode(result)
    return result
  }
}
