import {BaseCommand, describeWithExitCodes, untrustedExit} from '../cli/base-command.js'
import type {AgentLockState} from '../lib/status/agent-lock.js'
import {defaultStateDir} from '../lib/state/state-dir.js'
import {terminalText} from '../lib/util/terminal-text.js'
import {resolvePuppetArgs} from '../cli/run-options.js'
import {lockMetrics, puppetLockFlags} from './disable.js'

export default class Enable extends BaseCommand {
  static override summary = "Enable runs again: removes Puppet's agent_disabled lock, as `puppet agent --enable` does."
  static override description = describeWithExitCodes(
    'Removes the lock `localpuppet disable` or `puppet agent --disable` wrote. Enabling what is not disabled is fine. ' +
      'With --metrics-file (config metrics_file), the metrics file is rewritten at once: localpuppet_puppet_disabled is 0.',
    [
      {code: 0, meaning: 'enabled (or was not disabled)'},
      {code: 69, meaning: 'puppet is not available'},
      untrustedExit("the state dir, the puppet executable or the metrics file's directory"),
    ],
  )

  static override usage = '<%= command.id %> [FLAGS] [-- PUPPET_ARGS...]'
  static override examples = ['<%= config.bin %> enable']
  static override flags = puppetLockFlags

  async run(): Promise<AgentLockState & {wasDisabled: boolean; metricsWarning: string | null}> {
    this.splitPassThrough()
    const {flags} = await this.parse(Enable)
    const [{enableRuns}, {changeRunsLock}] = await Promise.all([import('../lib/status/agent-lock.js'), import('../lib/metrics/attempt-metrics.js')])
    const puppetArgs = await resolvePuppetArgs(this.passThrough)
    const stateDir = flags['state-dir'] ?? defaultStateDir()
    const state = await changeRunsLock(() => enableRuns(flags.puppet, puppetArgs, stateDir, flags['allow-untrusted']), stateDir, lockMetrics(flags, puppetArgs))
    this.warnUntrusted(state.untrusted)
    if (state.metricsWarning) this.warnLines([state.metricsWarning])
    this.log(state.wasDisabled ? `enabled (was disabled: ${terminalText(state.message)})` : 'enabled (was not disabled)')
    return state
  }
}
