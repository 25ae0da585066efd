import {BaseCommand, describeWithExitCodes} from '../cli/base-command.js'
import type {AgentLockState} from '../lib/puppet/agent-lock.js'
import {defaultStateDir} from '../lib/state/state-dir.js'
import {resolvePuppetArgs} from '../cli/run-options.js'
import {puppetLockFlags} from './disable.js'

export default class Enable extends BaseCommand {
  static override summary = "Enable runs again: removes Puppet's agent_disabled lock, as `puppet agent --enable` does."
  static override description = describeWithExitCodes('Removes the lock `localpuppet disable` or `puppet agent --disable` wrote. Enabling what is not disabled is fine.', [
    {code: 0, meaning: 'enabled (or was not disabled)'},
    {code: 69, meaning: 'puppet is not available'},
    {code: 77, meaning: 'the state dir or the puppet executable is owned by another user or writable by others (--allow-untrusted)'},
  ])

  static override usage = '<%= command.id %> [FLAGS] [-- PUPPET_ARGS...]'
  static override examples = ['<%= config.bin %> enable']
  static override flags = puppetLockFlags

  async run(): Promise<AgentLockState & {wasDisabled: boolean}> {
    this.splitPassThrough()
    const {flags} = await this.parse(Enable)
    const {enableRuns} = await import('../lib/puppet/agent-lock.js')
    const state = await enableRuns(flags.puppet, await resolvePuppetArgs(this.passThrough), flags['state-dir'] ?? defaultStateDir(), flags['allow-untrusted'])
    this.warnUntrusted(state.untrusted)
    this.log(state.wasDisabled ? `enabled (was disabled: ${state.message})` : 'enabled (was not disabled)')
    return state
  }
}
