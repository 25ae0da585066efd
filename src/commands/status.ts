import {Args, Flags} from '@oclif/core'

import {BaseCommand, describeWithExitCodes} from '../base-command.js'
import {stateFlags} from '../flags.js'
import {ExitCode, STATUS_EXIT_CODES} from '../lib/exit-codes.js'
import {assertRunId} from '../lib/state/run-id.js'
import {type RunRecord, settledRecord, latestRunId, readRunRecord} from '../lib/state/run-record.js'
import {defaultStateDir} from '../lib/state/state-dir.js'
import {isProcessAlive} from '../lib/util/process.js'
import {renderRunRecord} from '../render/run-text.js'

export default class Status extends BaseCommand {
  static override summary = 'Say how the last run (or the given one) went; --wait for it to finish.'
  static override description = describeWithExitCodes(
    "Shows a run's state, release, times, duration, exit codes, resource counts and log path. `--json` prints the run record. " +
      '`--wait` blocks until the run finishes (a fleet trigger that started it with apply --detach).',
    STATUS_EXIT_CODES,
  )

  static override examples = [
    '<%= config.bin %> status',
    '<%= config.bin %> status 20261122T091631.123Z-4f2a --json',
    '<%= config.bin %> status --wait --timeout 900',
  ]

  static override args = {
    runId: Args.string({name: 'RUN_ID', description: 'the run to show [default: the newest]'}),
  }

  static override flags = {
    ...stateFlags,
    wait: Flags.boolean({description: 'wait until the run is no longer running'}),
    timeout: Flags.integer({description: 'with --wait: give up after this many seconds (exit 75)', min: 1, dependsOn: ['wait'], helpValue: 'SECONDS'}),
  }

  async run(): Promise<RunRecord> {
    const {args, flags} = await this.parse(Status)
    const stateDir = flags['state-dir'] ?? defaultStateDir()
    const id = args.runId === undefined ? await latestRunId(stateDir) : assertRunId(args.runId)
    const read = async () => settledRecord(stateDir, await readRunRecord(stateDir, id), isProcessAlive)
    let record = await read()
    if (flags.wait) {
      const until = flags.timeout === undefined ? Number.POSITIVE_INFINITY : Date.now() + flags.timeout * 1000
      while (record.state === 'running' && Date.now() < until) {
        await new Promise((resolve) => setTimeout(resolve, Math.min(250, Math.max(0, until - Date.now()))))
        record = await read()
      }
    }

    this.log(renderRunRecord(record))
    process.exitCode = statusExitCode(record)
    return record
  }
}

function statusExitCode(record: RunRecord): number {
  if (record.state === 'succeeded' || record.state === 'skipped') return ExitCode.ok
  if (record.state === 'running') return ExitCode.tempFail
  return ExitCode.failed
}
