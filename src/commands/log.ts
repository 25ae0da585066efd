import {createReadStream} from 'node:fs'
import {pipeline} from 'node:stream/promises'

import {Args} from '@oclif/core'

import {BaseCommand, describeWithExitCodes} from '../base-command.js'
import {stateFlags} from '../flags.js'
import {describeFsError} from '../lib/errors.js'
import {assertRunId} from '../lib/state/run-id.js'
import {latestRunId, readRunRecord} from '../lib/state/run-record.js'
import {defaultStateDir} from '../lib/state/state-dir.js'

export default class Log extends BaseCommand {
  static override enableJsonFlag = false
  static override summary = "Print a run's full log: Puppet's output as it was streamed."
  static override description = describeWithExitCodes("Prints the newest run's log, or the given run's.", [
    {code: 0, meaning: 'printed'},
    {code: 66, meaning: 'no such run, no runs yet, or its log is gone'},
  ])

  static override examples = ['<%= config.bin %> log', '<%= config.bin %> log 20261122T091631.123Z-4f2a | less']

  static override args = {
    runId: Args.string({name: 'RUN_ID', description: 'the run whose log to print [default: the newest]'}),
  }

  static override flags = stateFlags

  async run(): Promise<void> {
    const {args, flags} = await this.parse(Log)
    const stateDir = flags['state-dir'] ?? defaultStateDir()
    const id = args.runId === undefined ? await latestRunId(stateDir) : assertRunId(args.runId)
    const record = await readRunRecord(stateDir, id)
    try {
      await pipeline(createReadStream(record.log), process.stdout, {end: false})
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'EPIPE') return
      throw describeFsError(error, `log of run ${id} (${record.log})`)
    }
  }
}
