import {Args} from '@oclif/core'

import {BaseCommand, describeWithExitCodes} from '../base-command.js'
import {stateFlags} from '../flags.js'
import {StillRunningError} from '../lib/errors.js'
import {ExitCode, STATUS_EXIT_CODES} from '../lib/exit-codes.js'
import {assertRunId} from '../lib/state/run-id.js'
import {type RunRecord, effectiveRecord, latestRunId, readRunRecord} from '../lib/state/run-record.js'
import {defaultStateDir} from '../lib/state/state-dir.js'
import {isProcessAlive} from '../lib/util/process.js'
import {renderRunRecord} from '../render/run-text.js'

export default class Status extends BaseCommand {
  static override summary = 'Say how the last run (or the given one) went.'
  static override description = describeWithExitCodes(
    'Shows a run\'s state, release, times, duration, exit codes, resource counts and log path. `--json` prints the run record.',
    STATUS_EXIT_CODES,
  )

  static override examples = ['<%= config.bin %> status', '<%= config.bin %> status 20261122T091631.123Z-4f2a --json']

  static override args = {
    runId: Args.string({name: 'RUN_ID', description: 'the run to show [default: the newest]'}),
  }

  static override flags = stateFlags

  async run(): Promise<RunRecord> {
    const {args, flags} = await this.parse(Status)
    const stateDir = flags['state-dir'] ?? defaultStateDir()
    const id = args.runId === undefined ? await latestRunId(stateDir) : assertRunId(args.runId)
    const record = effectiveRecord(await readRunRecord(stateDir, id), isProcessAlive)
    this.log(renderRunRecord(record))
    process.exitCode = statusExitCode(record)
    return record
  }
}

function statusExitCode(record: RunRecord): number {
  if (record.state === 'succeeded') return ExitCode.ok
  if (record.state === 'running') return new StillRunningError('').exitCode
  return ExitCode.failed
}
