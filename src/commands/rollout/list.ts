import {Flags} from '@oclif/core'

import {BaseCommand, describeWithExitCodes, untrustedExit} from '../../cli/base-command.js'
import {stateFlags, trustFlags} from '../../cli/flags.js'
import {defaultStateDir} from '../../lib/state/state-dir.js'

export default class RolloutList extends BaseCommand {
  static override summary = 'List the rollouts recorded in the state directory, newest first.'
  static override description = describeWithExitCodes(
    'One line per rollout: id, status (running, interrupted, done), release, nodes, how many succeeded, when, exit code. A rollout whose process is gone (killed, ' +
      'the machine went down) is interrupted, however its record was left, and --resume continues it.',
    [
      {code: 0, meaning: 'listed (also when there are none)'},
      untrustedExit('the rollouts directory or a record'),
    ],
  )

  static override examples = ['<%= config.bin %> rollout list', '<%= config.bin %> rollout list --limit 5 --json']
  static override flags = {
    ...stateFlags,
    ...trustFlags,
    limit: Flags.integer({description: 'show at most this many', min: 1, default: 20, helpValue: 'N'}),
  }

  async run(): Promise<unknown> {
    const {flags} = await this.parse(RolloutList)
    const [{listRolloutRecords, openRolloutsDir}, {recordAsSeen}, {renderRolloutList, rolloutJson}] = await Promise.all([
      import('../../lib/rollout/record.js'),
      import('../../lib/rollout/record-view.js'),
      import('../../cli/render/rollout-text.js'),
    ])
    const {dir, untrusted} = await openRolloutsDir(flags['state-dir'] ?? defaultStateDir(), flags['allow-untrusted'])
    this.warnUntrusted(untrusted)
    const {records, skipped} = await listRolloutRecords(dir, flags['allow-untrusted'])
    this.warnLines(skipped.map((line) => `skipped: ${line}`))
    const shown = records.slice(0, flags.limit).map((record) => recordAsSeen(record))
    if (!this.jsonEnabled()) this.log(shown.length === 0 ? `no rollouts yet in ${dir}` : renderRolloutList(shown))
    return shown.map((record) => rolloutJson(record, `${dir}/${record.id}.json`))
  }
}
