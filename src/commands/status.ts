import {Args, Flags} from '@oclif/core'

import {BaseCommand, describeWithExitCodes} from '../cli/base-command.js'
import {puppetFlags, stateFlags, trustFlags} from '../cli/flags.js'
import {settingString} from '../lib/config/settings.js'
import {NotFoundError, UntrustedPathError} from '../lib/errors.js'
import {ExitCode, STATUS_EXIT_CODES} from '../lib/exit-codes.js'
import {type CheckResult, DEFAULT_CHECK_CRIT, DEFAULT_CHECK_WARN} from '../lib/metrics/nagios-check.js'
import {assertRunId} from '../lib/state/run-id.js'
import {type RunRecord, readRunRecord, settledRecord} from '../lib/state/run-record.js'
import {assertTrustedStateDir, defaultStateDir} from '../lib/state/state-dir.js'
import {isProcessAlive} from '../lib/util/process.js'
import {renderRunRecord} from '../cli/render/run-text.js'

/** status --json: the record's fields, plus what an operator polling a fleet needs to know. */
export type StatusResult = RunRecord & {
  /** The newest run that ran puppet or was skipped, when the record shown is not one (refused, running). */
  lastCompleted: RunRecord | null
  puppetDisabled: {message: string} | null
  /** The input's app: the node's release from now on. */
  pointer: string | null
}

export default class Status extends BaseCommand {
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
    this.passThrough = await (await import('../cli/run-options.js')).resolvePuppetArgs(this.passThrough)
    const stateDir = flags['state-dir'] ?? defaultStateDir()
    const [{readNodeState}, {disabledState}, {readPointer}] = await Promise.all([
      import('../lib/state/node-state.js'),
      import('../lib/puppet/agent-lock.js'),
      import('../lib/input/pointer.js'),
    ])
    if (flags.check) return this.check(stateDir, flags.warn ?? DEFAULT_CHECK_WARN, flags.crit ?? DEFAULT_CHECK_CRIT, flags.puppet, flags['allow-untrusted'])
    // A forged record in a state dir others can write must not be believed (77).
    this.warnUntrusted(assertTrustedStateDir(stateDir, flags['allow-untrusted']))

    let id: string
    let node = await readNodeState(stateDir)
    if (args.runId === undefined) {
      if (!node.current) throw new NotFoundError(`no runs yet in ${stateDir}`)
      id = node.current.id
    } else {
      id = assertRunId(args.runId)
    }

    const read = async () => settledRecord(stateDir, await readRunRecord(stateDir, id), isProcessAlive)
    let record = await read()
    if (flags.wait) {
      const until = flags.timeout === undefined ? Number.POSITIVE_INFINITY : Date.now() + flags.timeout * 1000
      while (record.state === 'running' && Date.now() < until) {
        await new Promise((resolve) => setTimeout(resolve, Math.min(250, Math.max(0, until - Date.now()))))
        record = await read()
      }
    }

    // What the node did meanwhile: the wait may have lasted.
    if (flags.wait) node = await readNodeState(stateDir)
    const [puppetDisabled, pointer] = await Promise.all([disabledState(flags.puppet, this.passThrough, stateDir), readPointer(flags.input)])
    const lastCompleted = node.lastCompleted && node.lastCompleted.id !== record.id ? node.lastCompleted : null
    const result: StatusResult = {...record, lastCompleted, puppetDisabled, pointer}
    if (!this.jsonEnabled()) this.log(renderRunRecord(record, {lastCompleted, puppetDisabled, pointer, pointerFile: flags.input}))
    process.exitCode = statusExitCode(record)
    return result
  }

  /** --check: never throws; anything it cannot read is UNKNOWN (3), as plugins must. */
  private async check(stateDir: string, warn: string, crit: string, puppet: string, allowUntrusted: boolean): Promise<CheckResult> {
    const [{checkNode}, {readNodeState}, {disabledState}, {parseDuration}] = await Promise.all([
      import('../lib/metrics/nagios-check.js'),
      import('../lib/state/node-state.js'),
      import('../lib/puppet/agent-lock.js'),
      import('../lib/util/duration.js'),
    ])
    const [warnMs, critMs] = [parseDuration(warn, '--warn'), parseDuration(crit, '--crit')]
    let result: CheckResult
    try {
      this.warnUntrusted(assertTrustedStateDir(stateDir, allowUntrusted))
      const [node, disabled] = await Promise.all([readNodeState(stateDir), disabledState(puppet, this.passThrough, stateDir)])
      result = checkNode(node, disabled, warnMs, critMs)
    } catch (error) {
      // An untrusted state dir names itself, its owner, mode and fix: that line as it is.
      const what = error instanceof UntrustedPathError ? '' : `cannot read ${stateDir}: `
      result = {status: 'UNKNOWN', exitCode: 3, line: `LOCALPUPPET UNKNOWN - ${what}${(error as Error).message}`, ageSeconds: null}
    }

    if (!this.jsonEnabled()) this.log(result.line)
    process.exitCode = result.exitCode
    return result
  }
}

function statusExitCode(record: RunRecord): number {
  if (record.state === 'succeeded' || record.state === 'skipped') return ExitCode.ok
  if (record.state === 'running') return ExitCode.tempFail
  if (record.state === 'busy') return ExitCode.locked
  return ExitCode.failed
}
