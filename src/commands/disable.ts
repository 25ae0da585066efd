import {Args} from '@oclif/core'

import {BaseCommand, describeWithExitCodes} from '../cli/base-command.js'
import {puppetFlags, stateFlags, trustFlags} from '../cli/flags.js'
import type {AgentLockState} from '../lib/puppet/agent-lock.js'
import {defaultStateDir} from '../lib/state/state-dir.js'
import {resolvePuppetArgs} from '../cli/run-options.js'

export const puppetLockFlags = {
  ...stateFlags,
  ...trustFlags,
  ...puppetFlags,
}

export default class Disable extends BaseCommand {
  static override summary = "Disable runs with Puppet's own lock, as `puppet agent --disable` does."
  static override description = describeWithExitCodes(
    "Writes Puppet's agent_disabled lock with the message. While it exists, `apply` refuses (73) and shows the message, " +
      'and so does `puppet agent`. Arguments after `--` that move Puppet\'s state (--vardir, --statedir, --confdir) are honoured.',
    [
      {code: 0, meaning: 'disabled'},
      {code: 69, meaning: 'puppet is not available'},
      {code: 77, meaning: 'the state dir or the puppet executable is owned by another user or writable by others (--allow-untrusted)'},
    ],
  )

  static override usage = '<%= command.id %> [MESSAGE] [FLAGS] [-- PUPPET_ARGS...]'
  static override examples = ['<%= config.bin %> disable "maintenance until 14:00, ask ops"']
  static override args = {message: Args.string({description: 'why, shown to whoever tries to run', default: 'reason not specified'})}
  static override flags = puppetLockFlags

  async run(): Promise<AgentLockState> {
    this.splitPassThrough()
    const {args, flags} = await this.parse(Disable)
    const {disableRuns} = await import('../lib/puppet/agent-lock.js')
    const state = await disableRuns(flags.puppet, await resolvePuppetArgs(this.passThrough), flags['state-dir'] ?? defaultStateDir(), args.message, flags['allow-untrusted'])
    this.warnUntrusted(state.untrusted)
    this.log(`disabled: ${args.message} (${state.lockfile})`)
    return state
  }
}
