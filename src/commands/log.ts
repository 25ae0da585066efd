import {constants} from 'node:fs'
import {open} from 'node:fs/promises'
import {pipeline} from 'node:stream/promises'

import {Args} from '@oclif/core'

import {BaseCommand, describeWithExitCodes, untrustedExit} from '../cli/base-command.js'
import {terminalLines} from '../cli/render/log-text.js'
import {stateFlags, trustFlags} from '../cli/flags.js'
import {NotFoundError, describeFsError} from '../lib/errors.js'
import {assertRunId} from '../lib/state/run-id.js'
import {latestRunId, readRunRecord} from '../lib/state/run-record.js'
import {assertTrustedStateDir, defaultStateDir, runFiles} from '../lib/state/state-dir.js'

export default class Log extends BaseCommand {
  static override allowUntrustedHint = 'or pass --allow-untrusted to read its records anyway (with a warning)'

  static override enableJsonFlag = false
  static override summary = "Print a run's full log: Puppet's output as it was streamed (control characters shown escaped)."
  static override description = describeWithExitCodes("Prints the newest run's log, or the given run's.", [
    {code: 0, meaning: 'printed'},
    {code: 65, meaning: 'the run record (run.json) is damaged'},
    {code: 66, meaning: 'no such run, no runs yet, or its log is gone'},
    untrustedExit('the state dir'),
  ])

  static override examples = ['<%= config.bin %> log', '<%= config.bin %> log 20261122T091631.123Z-4f2a | less']

  static override args = {
    runId: Args.string({name: 'RUN_ID', description: 'the run whose log to print [default: the newest]'}),
  }

  static override flags = {...stateFlags, ...trustFlags}

  async run(): Promise<void> {
    const {args, flags} = await this.parse(Log)
    const stateDir = flags['state-dir'] ?? defaultStateDir()
    this.warnUntrusted(assertTrustedStateDir(stateDir, flags['allow-untrusted']))
    const id = args.runId === undefined ? await latestRunId(stateDir) : assertRunId(args.runId)
    // The record must be a record; the log's path is derived, never taken from it (a
    // forged run.json must not make root print /etc/shadow).
    await readRunRecord(stateDir, id)
    const path = runFiles(stateDir, id).log
    let handle
    try {
      handle = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK)
      if (!(await handle.stat()).isFile()) throw new NotFoundError(`log of run ${id} (${path}): not a regular file`)
    } catch (error) {
      await handle?.close()
      if (error instanceof NotFoundError) throw error
      if ((error as NodeJS.ErrnoException).code === 'ELOOP') throw new NotFoundError(`log of run ${id} (${path}): a symbolic link, not the run's log`)
      throw describeFsError(error, `log of run ${id} (${path})`)
    }

    try {
      await pipeline(handle.createReadStream(), terminalLines(), process.stdout, {end: false})
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'EPIPE') return
      throw describeFsError(error, `log of run ${id} (${path})`)
    }
  }
}
