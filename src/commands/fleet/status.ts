import {BaseCommand, describeWithExitCodes} from '../../cli/base-command.js'
import {type McoFlagValues, mcoFlags, transportSpec} from '../../cli/fleet-flags.js'
import {stateFlags, trustFlags} from '../../cli/flags.js'
import {defaultStateDir} from '../../lib/state/state-dir.js'

export default class FleetStatus extends BaseCommand {
  static override summary = 'Desired against applied, fleet-wide: per node its wanted release, what it applied, its newest attempt, drift.'
  static override description = describeWithExitCodes(
    "Per node: wanted (its input's app), applied (the release of its newest run that succeeded without --noop: a noop or failed " +
      'run never counts as applied), whether that is the wanted one, the newest attempt with its release and age, drift (the newest ' +
      "noop run's out-of-sync count, or the newest run's corrective changes), Puppet disabled; then counts by applied release and " +
      'state. A node the last discovery with the same filters found that does not answer now is "no answer", never left out.',
    [
      {code: 0, meaning: "every node answered and has applied its wanted release"},
      {code: 1, meaning: 'a node has not applied its wanted release, or did not answer; or no node matched'},
      {code: 64, meaning: 'usage error'},
      {code: 69, meaning: 'mco cannot be run or the broker cannot be reached'},
      {code: 77, meaning: 'the rollouts directory (where the fleet is remembered) is owned by another user or writable by others (--allow-untrusted)'},
    ],
  )

  static override usage = '<%= command.id %> --via mco [DISCOVERY FLAGS]'
  static override examples = ['<%= config.bin %> fleet status', '<%= config.bin %> fleet status -W role=web --json', '<%= config.bin %> fleet status --nodes fleet.txt']
  static override flags = {...mcoFlags, ...stateFlags, ...trustFlags}

  async run(): Promise<unknown> {
    const {flags} = await this.parse(FleetStatus)
    const [{fleetStatusViaMco}, {renderFleetStatus}] = await Promise.all([import('../../lib/fleet/fleet-status.js'), import('../../cli/render/rollout-text.js')])
    const status = await fleetStatusViaMco(transportSpec(flags as McoFlagValues), {stateDir: flags['state-dir'] ?? defaultStateDir(), allowUntrusted: flags['allow-untrusted']}, (line) => this.warnLines([line]))
    if (!this.jsonEnabled()) this.log(renderFleetStatus(status))
    process.exitCode = status.ok ? 0 : 1
    return status
  }
}
