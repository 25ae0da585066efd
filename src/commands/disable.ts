import {Args} from '@oclif/core'

import {BaseCommand, describeWithExitCodes, untrustedExit} from '../cli/base-command.js'
import {metricsFlags, puppetFlags, stateFlags, trustFlags} from '../cli/flags.js'
import type {AgentLockState} from '../lib/status/agent-lock.js'
import {defaultStateDir} from '../lib/state/state-dir.js'
import {terminalText} from '../lib/util/terminal-text.js'
import {resolvePuppetArgs} from '../cli/run-options.js'

export const puppetLockFlags = {
  ...stateFlags,
  ...trustFlags,
  ...puppetFlags,
  ...metricsFlags,
}

/** What disable and enable need to rewrite the metrics file. */
export function lockMetrics(flags: {puppet: string; 'metrics-file'?: string; 'allow-untrusted'?: boolean}, puppetArgs: string[]) {
  return {metricsFile: flags['metrics-file'], puppet: flags.puppet, puppetArgs, allowUntrusted: flags['allow-untrusted']}
}

export default class Disable extends BaseCommand {
  static override summary = "Disable runs with Puppet's own lock, as `puppet agent --disable` does."
  static override description = describeWithExitCodes(
    "Writes Puppet's agent_disabled lock with the message. While it exists, `apply` refuses (73) and shows the message, " +
      'and so does `puppet agent`. Arguments after `--` that move Puppet\'s state (--vardir, --statedir, --confdir) are honoured. ' +
      'With --metrics-file (config metrics_file), the metrics file is rewritten at once: localpuppet_puppet_disabled is 1 with the message.',
    [
      {code: 0, meaning: 'disabled'},
      {code: 69, meaning: 'puppet is not available'},
      untrustedExit("the state dir, the puppet executable or the metrics file's directory"),
    ],
  )

  static override usage = '<%= command.id %> [MESSAGE] [FLAGS] [-- PUPPET_ARGS...]'
  static override examples = ['<%= config.bin %> disable "maintenance until 14:00, ask ops"']
  static override args = {message: Args.string({description: 'why, shown to whoever tries to run', default: 'reason not specified'})}
  static override flags = puppetLockFlags

  async run(): Promise<AgentLockState & {metricsWarning: string | null}> {
    this.splitPassThrough()
    const {args, flags} = await this.parse(Disable)
    const [{disableRuns}, {changeRunsLock}] = await Promise.all([import('../lib/status/agent-lock.js'), import('../lib/metrics/attempt-metrics.js')])
    const puppetArgs = await resolvePuppetArgs(this.passThrough)
    const stateDir = flags['state-dir'] ?? defaultStateDir()
    const state = await changeRunsLock(() => disableRuns(flags.puppet, puppetArgs, stateDir, args.message, flags['allow-untrusted']), stateDir, lockMetrics(flags, puppetArgs))
    this.warnUntrusted(state.untrusted)
    if (state.metricsWarning) this.warnLines([state.metricsWarning])
    this.log(`disabled: ${terminalText(args.message)} (${terminalText(state.lockfile)})`)
    return state
  }
}
