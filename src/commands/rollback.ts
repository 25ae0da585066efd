import {Args, Flags} from '@oclif/core'

import {AttemptCommand} from '../cli/attempt-command.js'
import {describeWithExitCodes} from '../cli/base-command.js'
import {attemptFlags} from '../cli/flags.js'
import {settingString} from '../lib/config/settings.js'
import {APPLY_EXIT_CODES} from '../lib/exit-codes.js'
import type {RunRecord} from '../lib/state/run-record.js'
import {defaultStateDir} from '../lib/state/state-dir.js'

export default class Rollback extends AttemptCommand {
  static override summary = 'Replay the newest succeeded run of another release than the current one.'
  static override description = describeWithExitCodes(
    "The current release is the newest completed run's. Rollback picks the newest run that succeeded (not --noop) with another " +
      'release, says which, and replays it as `apply --replay RUN_ID` does: the same release, ENC document, facts, manifest and ' +
      "puppet arguments. It asks nothing. With --save the input's app follows, so the next timer run stays on it. " +
      'Takes apply\'s run flags. 66 when there is no such run.',
    APPLY_EXIT_CODES,
  )

  static override usage = '<%= command.id %> [INPUT] [FLAGS] [-- PUPPET_ARGS...]'
  static override examples = ['<%= config.bin %> rollback', '<%= config.bin %> rollback --save', '<%= config.bin %> rollback --detach --json', '<%= config.bin %> rollback --to web/tags/1.0.0 --save']
  static override args = {
    input: Args.string({description: 'the input whose app --save rewrites (env LOCALPUPPET_INPUT, config input)', default: async () => (await settingString('input')) as string}),
  }

  static override flags = {
    ...attemptFlags,
    to: Flags.string({
      description: 'roll back to exactly this release (its newest succeeded run), not the newest other one: what a fleet rollout reverts with',
      helpValue: 'RELEASE',
    }),
  }

  async run(): Promise<RunRecord> {
    this.splitPassThrough()
    const {args, flags} = await this.parse(Rollback)
    // Usage first: before looking for a run to roll back to (66).
    const [{assertAttemptUsage}, {findRollbackTarget}] = await Promise.all([import('../lib/attempt/options.js'), import('../lib/run/replay.js')])
    assertAttemptUsage(flags)
    const {from, target} = await findRollbackTarget(flags['state-dir'] ?? defaultStateDir(), flags.to)
    const say = `rolling back from ${from ?? '(no completed run)'} to ${target.release}: replaying run ${target.id}`
    // Without --save the input still names the release rolled back from: the next (timer) run undoes this one.
    const pointer = flags.save || flags.noop ? null : await (await import('../lib/input/pointer.js')).readPointer(args.input)
    const {to: _to, ...runFlags} = flags
    const record = await this.runAttempt(args.input, {...runFlags, replay: target.id}, () => {
      if (!this.jsonEnabled()) this.note(say)
    })
    if (pointer !== null && pointer !== target.release) {
      this.warnLines([`${args.input} still names ${pointer}: the next run without --app applies that again; rollback --save makes ${target.release} the node's release`])
    }

    return record
  }
}
