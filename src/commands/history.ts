import {Flags} from '@oclif/core'

import {BaseCommand, describeWithExitCodes, untrustedExit} from '../cli/base-command.js'
import {stateFlags, trustFlags} from '../cli/flags.js'
import {DamagedRecordError, NotFoundError} from '../lib/errors.js'
import {type RunRecord, settledRecord, listRunIds, readRunRecord} from '../lib/state/run-record.js'
import {assertTrustedStateDir, defaultStateDir} from '../lib/state/state-dir.js'
import {isProcessAlive} from '../lib/util/process.js'
import {renderHistory} from '../cli/render/run-text.js'

export default class History extends BaseCommand {
  static override allowUntrustedHint = 'or pass --allow-untrusted to read its records anyway (with a warning)'

  static override summary = 'List runs, newest first.'
  static override description = describeWithExitCodes('One line per run: id, state, release, start, duration, changed and failed counts. `--json` gives the run records.', [
    {code: 0, meaning: 'listed (also when there are no runs)'},
    untrustedExit('the state dir'),
  ])

  static override examples = ['<%= config.bin %> history', '<%= config.bin %> history --limit 5 --json']

  static override flags = {
    ...stateFlags,
    ...trustFlags,
    limit: Flags.integer({description: 'show at most this many runs', min: 1, default: 20, helpValue: 'N'}),
  }

  async run(): Promise<RunRecord[]> {
    const {flags} = await this.parse(History)
    const stateDir = flags['state-dir'] ?? defaultStateDir()
    this.warnUntrusted(assertTrustedStateDir(stateDir, flags['allow-untrusted']))
    const ids = (await listRunIds(stateDir)).reverse()
    const records: RunRecord[] = []
    for (const id of ids) {
      if (records.length >= flags.limit) break
      // A directory whose record is missing (a run killed while starting) is skipped; a
      // damaged one too, with a warning naming it.
      const record = await readRunRecord(stateDir, id).catch((error: unknown) => {
        if (error instanceof DamagedRecordError) this.warnLines([`skipped: ${error.message}`])
        else if (!(error instanceof NotFoundError)) throw error
        return null
      })
      if (record) records.push(await settledRecord(stateDir, record, isProcessAlive))
    }

    if (!this.jsonEnabled()) this.log(records.length === 0 ? `no runs yet in ${stateDir}` : renderHistory(records))
    return records
  }
}
