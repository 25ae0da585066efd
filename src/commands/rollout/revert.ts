import {Args} from '@oclif/core'

import {BaseCommand, describeWithExitCodes, untrustedExit} from '../../cli/base-command.js'
import {stateFlags, trustFlags} from '../../cli/flags.js'
import {defaultStateDir} from '../../lib/state/state-dir.js'
import Rollout from './index.js'

export default class RolloutRevert extends BaseCommand {
  static override summary = 'Put back what a rollout changed: each node it moved goes back to the release it had before, in a rollout of its own.'
  static override description = describeWithExitCodes(
    "Every node whose applied release the rollout ID changed goes back to the one it had before it (rollback --to that release, replaying the node's own " +
      'earlier run; with --save if the rollout saved, so its pointer goes back too), with the same machinery as a rollout: --canary, --batch or --window, ' +
      '--max-failures, --deadline, a record in rollouts/ that rollout show and list read and --resume continues. Nodes going back to different releases go ' +
      'in one rollout per release, one after the other; one that does not entirely succeed stops the rest. A node with no release before the rollout has ' +
      'nothing to go back to and is said so.',
    [
      {code: 0, meaning: 'every node the rollout moved is back (also when it moved none)'},
      {code: 1, meaning: 'a node is not back: its rollback failed, was refused, busy, missed its deadline, did not answer or was not started, or it had nothing to go back to'},
      {code: 64, meaning: 'usage error (ID is not a rollout id)'},
      {code: 65, meaning: 'the record is damaged'},
      {code: 66, meaning: 'no such rollout'},
      {code: 69, meaning: 'mco cannot be run or the broker cannot be reached (the revert is recorded: rollout --resume continues it)'},
      {code: 73, meaning: 'the rollout is still being driven by its process'},
      {code: 75, meaning: 'the rollout was interrupted with runs going: rollout --resume ID first, so that what they did is known'},
      untrustedExit('the rollouts directory or the record'),
      {code: '130/143', meaning: 'interrupted by SIGINT/SIGTERM: runs already started go on; rollout --resume continues'},
    ],
  )

  static override examples = ['<%= config.bin %> rollout revert 20261125T120000.000Z-1a2b', '<%= config.bin %> rollout revert 20261125T120000.000Z-1a2b --batch 25% --max-failures 1 --json']
  static override args = {id: Args.string({description: 'the rollout to put back (rollout list shows them)', required: true})}
  static override flags = {
    canary: Rollout.flags.canary,
    batch: Rollout.flags.batch,
    window: Rollout.flags.window,
    'max-failures': Rollout.flags['max-failures'],
    soak: Rollout.flags.soak,
    deadline: Rollout.flags.deadline,
    timeout: Rollout.flags.timeout,
    ...stateFlags,
    ...trustFlags,
  }

  async run(): Promise<unknown> {
    const {args, flags} = await this.parse(RolloutRevert)
    const [{revertRollout}, {withStopSignals}, {rolloutsDir}, render] = await Promise.all([
      import('../../lib/rollout/revert.js'),
      import('../../lib/util/on-stop.js'),
      import('../../lib/rollout/record.js'),
      import('../../cli/render/rollout-text.js'),
    ])
    const stateDir = flags['state-dir'] ?? defaultStateDir()
    const result = await withStopSignals((signal) => revertRollout(args.id, flags, {stateDir, allowUntrusted: flags['allow-untrusted'], signal}, {warn: (line) => this.warnLines([line])}))
    const dir = rolloutsDir(stateDir)
    if (!this.jsonEnabled()) this.log(render.renderRevert(result, dir))
    process.exitCode = result.exitCode
    return render.revertJson(result, dir)
  }
}
