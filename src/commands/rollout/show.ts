import {Args} from '@oclif/core'

import {BaseCommand, describeWithExitCodes, untrustedExit} from '../../cli/base-command.js'
import {stateFlags, trustFlags} from '../../cli/flags.js'
import {defaultStateDir} from '../../lib/state/state-dir.js'

export default class RolloutShow extends BaseCommand {
  static override summary = 'Show one recorded rollout: its table and summary, as it ended or as far as it got.'
  static override description = describeWithExitCodes('The same table and summary the rollout printed, from its record. Exit code: the rollout\'s own (0 every node succeeded; 1 otherwise), 75 while it is still running or interrupted.', [
    {code: 0, meaning: 'the rollout ended and every targeted node succeeded (or was up to date)'},
    {code: 1, meaning: 'the rollout ended and a node did not succeed'},
    {code: 64, meaning: 'ID is not a rollout id'},
    {code: 65, meaning: 'the record is damaged'},
    {code: 66, meaning: 'no such rollout'},
    {code: 75, meaning: 'the rollout is running, or was interrupted (--resume continues it)'},
    untrustedExit('the rollouts directory or the record'),
  ])

  static override examples = ['<%= config.bin %> rollout show 20261125T120000.000Z-1a2b', '<%= config.bin %> rollout show 20261125T120000.000Z-1a2b --json']
  static override args = {id: Args.string({description: 'the rollout (rollout list shows them)', required: true})}
  static override flags = {...stateFlags, ...trustFlags}

  async run(): Promise<unknown> {
    const {args, flags} = await this.parse(RolloutShow)
    const [{openRolloutsDir, readRolloutRecord}, {recordAsSeen}, {renderRollout, rolloutJson}] = await Promise.all([
      import('../../lib/rollout/record.js'),
      import('../../lib/rollout/record-view.js'),
      import('../../cli/render/rollout-text.js'),
    ])
    const {dir, untrusted} = await openRolloutsDir(flags['state-dir'] ?? defaultStateDir(), flags['allow-untrusted'])
    this.warnUntrusted(untrusted)
    const record = recordAsSeen(await readRolloutRecord(dir, args.id, flags['allow-untrusted']))
    const path = `${dir}/${record.id}.json`
    if (!this.jsonEnabled()) this.log(renderRollout(record, path))
    process.exitCode = record.status === 'done' ? (record.exitCode ?? 1) : 75
    return rolloutJson(record, path)
  }
}
