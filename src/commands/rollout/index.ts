import {Args, Flags} from '@oclif/core'

import {BaseCommand, describeWithExitCodes} from '../../cli/base-command.js'
import {type FleetFlagValues, fleetFlags, transportSpec} from '../../cli/fleet-flags.js'
import {flagsGiven, judgeRolloutArgs} from '../../cli/rollout-args.js'
import {sourceFlags, stateFlags, trustFlags} from '../../cli/flags.js'
import {ROLLOUT_EXIT_CODES} from '../../lib/exit-codes.js'
import {defaultStateDir} from '../../lib/state/state-dir.js'

export default class Rollout extends BaseCommand {
  static override summary = 'Roll a release out over a fleet: canaries, batches or a window, a failure budget, deadlines, soak, revert, resume.'
  static override description = describeWithExitCodes(
    'Starts REF (or, without it, each node\'s own input) on the nodes the discovery flags find (--via ssh: the nodes --nodes, --targets or --inventory lists, ' +
      'each reached with the system\'s ssh, host keys checked), in natural name order (db2 before db10), ' +
      'the --canary nodes first, then in --batch sizes (1,5,25%,100%: Ansible\'s serial, but a percentage is of the nodes left after the ' +
      'canaries, rounded down, at least 1) or a --window of nodes kept running. REF is checked before any node is asked: its syntax (64), ' +
      'and that the signed index of the source (--source, or the source setting) holds it (66). Nodes that fail, are refused, miss ' +
      'their --deadline or do not answer count against --max-failures; once it is spent no further node starts, and --revert puts ' +
      'nodes back on the release they had before. A busy node (73: another run in progress) is tried once more later and not ' +
      'counted. The rollout is recorded in rollouts/<id>.json in the state directory after every event: --resume ID continues it, and ' +
      'rollout revert ID later puts back every node it moved.',
    ROLLOUT_EXIT_CODES,
  )

  static override usage = ['<%= command.id %> [REF] --via mco [DISCOVERY FLAGS] [FLAGS]', '<%= command.id %> [REF] --via ssh --nodes FILE|--targets LIST|--inventory FILE [SSH FLAGS] [FLAGS]', '<%= command.id %> --resume ID']
  static override examples = [
    '<%= config.bin %> rollout foo/tags/1.5.0 -W role=web --canary 1 --batch 1,5,25%,100% --max-failures 5%',
    '<%= config.bin %> rollout foo/tags/1.5.0 --nodes fleet.txt --window 10 --deadline 30m --fetch --save',
    '<%= config.bin %> rollout foo/tags/1.5.0 -I web1 -I web2 --soak 10m --revert all --json',
    '<%= config.bin %> rollout foo/tags/1.5.0 --via ssh --inventory fleet.yaml --canary 1 --batch 25%',
    '<%= config.bin %> rollout --resume 20261125T120000.000Z-1a2b',
  ]

  static override args = {
    ref: Args.string({description: "the release to apply (foo/tags/1.5.0, foo@^1.5); default: each node's own input"}),
    // Not a REF: where `rollout revrt ID` puts its ID, so that the typo is the error said, not this argument.
    extra: Args.string({hidden: true}),
  }

  static override flags = {
    ...fleetFlags,
    canary: Flags.integer({description: 'run the first N nodes on their own first', min: 1, helpValue: 'N'}),
    batch: Flags.string({description: 'batch sizes in turn, the last repeated: N, N% (of the nodes after the canaries) or a list (1,5,25%,100%) [default: all at once]', exclusive: ['window'], helpValue: 'LIST'}),
    window: Flags.integer({description: 'keep N nodes running, starting the next as one finishes', min: 1, helpValue: 'N'}),
    'max-failures': Flags.string({description: 'nodes that may fail (N or N%) before no further node starts', default: '0', helpValue: 'N|N%'}),
    soak: Flags.string({description: 'wait this long after each group, then ask its nodes again: one whose newest run failed since counts as failed (90s, 10m, 1h)', helpValue: 'DURATION'}),
    deadline: Flags.string({description: 'a node with no final run this long after it was started has failed (deadline) [default: 1h, or --timeout + 5m]', helpValue: 'DURATION'}),
    revert: Flags.string({description: 'on stop, put back on the release they had before: the nodes that failed, every node moved (all), or none', options: ['failed', 'all', 'none'], default: 'failed'}),
    'only-outdated': Flags.boolean({description: 'skip nodes whose newest run already succeeded on REF (listed as up to date)'}),
    noop: Flags.boolean({description: 'run Puppet with --noop on every node (nothing is reverted)'}),
    fetch: Flags.boolean({description: "each node first fetches the release from its configured source"}),
    save: Flags.boolean({description: "REF becomes each node's release (its input's app), once its run succeeded"}),
    timeout: Flags.integer({description: "each run's own limit (apply --timeout)", min: 1, helpValue: 'SECONDS'}),
    resume: Flags.string({description: 'continue an interrupted rollout exactly where its record left it', helpValue: 'ID'}),
    source: Flags.string({
      description:
        "check that REF is in this release repository's signed index before any node is asked (66 if not), read as a node reads it and remembered nowhere [default: the source setting; none: only REF's syntax is checked] (env LOCALPUPPET_SOURCE, config source)",
      helpValue: 'URL|DIR',
    }),
    trust: sourceFlags.trust,
    insecure: sourceFlags.insecure,
    ...stateFlags,
    ...trustFlags,
  }

  async run(): Promise<unknown> {
    const {args, flags, raw} = await this.parse(Rollout)
    const stateDir = flags['state-dir'] ?? defaultStateDir()
    const [{checkRefInSource, checkRefSyntax}, {startRollout, resumeRollout}, {rolloutSettings}, {withStopSignals}, render] = await Promise.all([
      import('../../lib/rollout/ref-check.js'),
      import('../../lib/rollout/rollout.js'),
      import('../../lib/rollout/settings.js'),
      import('../../lib/util/on-stop.js'),
      import('../../cli/render/rollout-text.js'),
    ])
    // REF and the flags are judged here, before any node is asked: a typo must not reach the fleet.
    judgeRolloutArgs(args, flags.resume, flagsGiven(raw), checkRefSyntax)
    const settings = flags.resume === undefined ? rolloutSettings({...flags, ref: args.ref ?? null}) : null
    if (args.ref !== undefined) {
      const found = await checkRefInSource(args.ref, {source: flags.source, trust: flags.trust, insecure: flags.insecure, allowUntrusted: flags['allow-untrusted']})
      if (found) this.warnLines(found.warnings)
    }

    // The nodes and how to reach them are judged before anything is asked of them, too.
    const spec = flags.resume === undefined ? await transportSpec(flags as FleetFlagValues) : null
    const tty = !this.jsonEnabled() && process.stderr.isTTY
    let shown = false
    const io = {
      warn: (line: string) => this.warnLines([line]),
      progress: tty
        ? (engine: Parameters<typeof render.progressLine>[0]) => {
            process.stderr.write(`\r\u001B[2K${render.progressLine(engine)}`)
            shown = true
          }
        : undefined,
    }
    const result = await withStopSignals((signal) =>
      flags.resume === undefined
        ? startRollout(settings!, spec!, {stateDir, allowUntrusted: flags['allow-untrusted'], signal}, io)
        : resumeRollout(flags.resume, {stateDir, allowUntrusted: flags['allow-untrusted'], signal}, io),
    )
    if (shown) process.stderr.write('\r\u001B[2K')
    const {rolloutsDir} = await import('../../lib/rollout/record.js')
    const path = `${rolloutsDir(stateDir)}/${result.record.id}.json`
    if (!this.jsonEnabled()) this.log(render.renderRollout(result.record, path))
    process.exitCode = result.exitCode
    return render.rolloutJson(result.record, path)
  }
}
