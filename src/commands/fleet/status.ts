import {Flags} from '@oclif/core'

import {BaseCommand, describeWithExitCodes, untrustedExit} from '../../cli/base-command.js'
import {fleetSourceSpec, fleetFlags, replyTimeoutFlag} from '../../cli/fleet-flags.js'
import {sourceFlags, stateFlags} from '../../cli/flags.js'
import {defaultStateDir} from '../../lib/state/state-dir.js'

export default class FleetStatus extends BaseCommand {
  static override summary = 'Desired against applied, fleet-wide: per node its wanted release, what it applied, its newest attempt, drift.'
  static override description = describeWithExitCodes(
    "Per node: wanted (its input's app, and the tag its channel resolved to), applied (the release of its newest run that succeeded " +
      'without --noop: a noop or failed run never counts as applied), whether that is the wanted one, the newest attempt with its ' +
      "release and age (a failed one with its run id and Puppet's first error line), drift (the newest noop run's out-of-sync count, or the resources the newest run put back with the fingerprint of the run before, which succeeded: see Drift in docs/monitoring.md), Puppet disabled; " +
      'then counts by applied release and state. --via mco asks each node; a node the last discovery with the same filters found ' +
      'that does not answer now is "no answer", never left out. --via ssh asks each node listed (--nodes, --targets, --inventory) over SSH. --prometheus URL reads the node metrics instead (a fleet without ' +
      'MCollective): a node seen within --lookback whose metrics are gone is "stopped reporting". --puppetdb URL reads the nodes\' reports and ' +
      "localpuppet facts in PuppetDB (a failed node's message is Puppet's first error).",
    [
      {code: 0, meaning: 'every node answered (or reports) and has applied its wanted release'},
      {code: 1, meaning: 'a node has not applied its wanted release, did not answer (stopped reporting), or its metrics disagree or collide; or no node matched (--prometheus, --puppetdb: a line says why)'},
      {code: 64, meaning: 'usage error (--source apt; plain http with no trusted key and no --insecure; --channel not a channel name; --via ssh without exactly one of --nodes, --targets, --inventory, or with a discovery flag of mco)'},
      {code: 65, meaning: "--source: the repository's index is invalid, not signed by a trusted key, older than one this machine accepted, expired, or of another repository than the repository_id setting names; the --inventory is invalid"},
      {code: 66, meaning: 'the --nodes, --inventory or --ssh-config file is missing'},
      {code: 69, meaning: 'mco or ssh cannot be run, or the broker cannot be reached; Prometheus, PuppetDB or the repository cannot be reached or cannot answer (Prometheus: not in time, --prometheus-timeout; a series or value that cannot be; too many series or nodes)'},
      {code: 77, meaning: `${untrustedExit('the rollouts directory (where the fleet is remembered), or with --source an unsigned repository directory or the record of accepted index versions,').meaning}; --via ssh: the --nodes, --inventory, --ssh-config or --known-hosts file or the ssh executable is (no override)`},
    ],
  )

  static override usage = '<%= command.id %> [--via mco [DISCOVERY FLAGS] | --via ssh --nodes FILE|--targets LIST|--inventory FILE [SSH FLAGS] | --prometheus URL [--source URL|DIR] [--channel NAME] [--lookback DURATION] [--prometheus-timeout DURATION] | --puppetdb URL [--source URL|DIR] [--channel NAME] [--lookback DURATION]]'
  static override examples = [
    '<%= config.bin %> fleet status',
    '<%= config.bin %> fleet status -W role=web --json',
    '<%= config.bin %> fleet status --nodes fleet.txt',
    '<%= config.bin %> fleet status --via ssh --inventory fleet.yaml',
    '<%= config.bin %> fleet status --prometheus http://prometheus:9090',
    '<%= config.bin %> fleet status --prometheus http://prometheus:9090 --channel canary --json',
    '<%= config.bin %> fleet status --puppetdb https://puppetdb:8081 --channel canary',
    '<%= config.bin %> fleet status --prometheus http://prometheus:9090 --source https://releases.example.com/puppet --trust release-key.pub.pem',
  ]

  static override flags = {
    ...fleetFlags,
    'reply-timeout': replyTimeoutFlag('seconds each node has to answer the status request (mco -t) [default: 20]'),
    via: Flags.string({description: 'how to reach the fleet [default: ssh with --targets or --inventory, prometheus with --prometheus or the prometheus setting, puppetdb with --puppetdb or the puppetdb setting, else mco]', options: ['mco', 'ssh', 'prometheus', 'puppetdb']}),
    puppetdb: Flags.string({description: "read the fleet from the nodes' reports and localpuppet facts in this PuppetDB (https://host:8081; puppetdb_ca, puppetdb_cert, puppetdb_key) [default: the puppetdb setting, when no prometheus setting] (env LOCALPUPPET_PUPPETDB, config puppetdb)", helpValue: 'URL'}),
    prometheus: Flags.string({description: 'read the fleet from the node metrics in this Prometheus (http://host:9090) [default: the prometheus setting] (env LOCALPUPPET_PROMETHEUS, config prometheus)', helpValue: 'URL'}),
    lookback: Flags.string({description: '--prometheus: list nodes seen this far back whose metrics are gone as "stopped reporting" [default: 1d]', helpValue: 'DURATION'}),
    channel: Flags.string({description: '--prometheus: only the nodes whose input follows this channel', helpValue: 'NAME'}),
    'prometheus-timeout': Flags.string({description: '--prometheus: the time each answer of Prometheus has, whole (else 69) [default: 5m]', helpValue: 'DURATION'}),
    source: Flags.string({
      description:
        "--prometheus: resolve each node's wanted release through this release repository's signed index now (a channel's tag, a range's newest match), read as a node reads it and remembered nowhere [default: the source setting, if any; else wanted is as of each node's last run] (env LOCALPUPPET_SOURCE, config source)",
      helpValue: 'URL|DIR',
    }),
    trust: sourceFlags.trust,
    insecure: sourceFlags.insecure,
    ...stateFlags,
    'allow-untrusted': Flags.boolean({
      description:
        'use a rollouts directory (where --via mco remembers the fleet) or, with --source, an unsigned repository directory or the record of accepted index versions, that is owned by another user or writable by others (a warning)',
    }),
  }

  async run(): Promise<unknown> {
    const {flags} = await this.parse(FleetStatus)
    const [{renderFleetStatus}, {fleetStatus}] = await Promise.all([import('../../cli/render/rollout-text.js'), import('../../lib/fleet/sources/index.js')])
    const spec = await fleetSourceSpec(flags)
    const status = await fleetStatus(spec, {stateDir: flags['state-dir'] ?? defaultStateDir(), allowUntrusted: flags['allow-untrusted']}, (line) => this.warnLines([line]))
    if (!this.jsonEnabled()) this.log(renderFleetStatus(status))
    process.exitCode = status.ok ? 0 : 1
    return status
  }
}
