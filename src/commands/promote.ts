import {Args, Flags} from '@oclif/core'

import {expiryWarning} from '../lib/repository/index-expiry.js'
import {BaseCommand, describeWithExitCodes} from '../cli/base-command.js'
import type {PromoteResult} from '../lib/repository/promote.js'
import type {ChannelHealth} from '../lib/fleet/channel-health.js'
import type {PolicyVerdict} from '../lib/channels/channel-policy.js'
import {UsageError} from '../lib/errors.js'
import {terminalText} from '../lib/util/terminal-text.js'

export default class Promote extends BaseCommand {
  static override summary = "Point a release channel at a published tag: the nodes whose input names APP/channels/NAME take it on their next apply --fetch."
  static override description = describeWithExitCodes(
    "Rewrites the repository's index as publish does (under its lock; next version, new expiry, signed, replaced atomically), " +
      'so a node sees the channel move all at once or not at all. With --require-healthy CHANNEL and --prometheus URL, ' +
      'first asks Prometheus whether every node following CHANNEL has applied this tag and its last run succeeded for at ' +
      'least --for (and at least --min-nodes such nodes): if not, nothing changes, and the nodes not there yet are named with ' +
      'why (not yet run, failed, disabled, stale, stopped reporting). A staged rollout for a pull fleet: promote to canary, ' +
      "let the canaries' timers apply it, then promote to stable --require-healthy canary. With --puppetdb URL (or only the puppetdb setting), " +
      "the same verdicts from the nodes' reports and facts in PuppetDB, a failed node's with Puppet's first error. A channel's policy (channel policy) " +
      'is that gate kept in the signed index and checked by every promote to the channel; --override-policy REASON moves it anyway, ' +
      "the reason recorded in the channel's history (channel history). A yanked tag is refused.",
    [
      {code: 0, meaning: 'the channel names the tag (moved, or already there)'},
      {code: 1, meaning: "--require-healthy, or the channel's policy: a node following the channel it names is not healthy on the tag yet, or too few are; nothing changed (one line names the policy and what was missing)"},
      {code: 64, meaning: 'usage error (not an exact tag, a bad channel name (--channel or --require-healthy), --require-healthy or a channel with a policy without --prometheus, --puppetdb or their setting, both --prometheus and --puppetdb, --for or --min-nodes without --require-healthy, --prometheus, --puppetdb, --stale-after or --prometheus-timeout with neither --require-healthy nor a policy, --override-policy on a channel without one or without a reason)'},
      {code: 65, meaning: "the repository's index (or a channel's history or policy in it) is invalid"},
      {code: 66, meaning: 'the tag is not published, or is yanked; or no repository there'},
      {code: 69, meaning: 'Prometheus or PuppetDB cannot be reached, does not answer in time (--prometheus-timeout), or answers what is not the node metrics or reports (a series, value or row that cannot be, too many series)'},
      {code: 73, meaning: "another publisher held the lock too long; the channel's policy changed while promote checked it"},
    ],
  )

  static override usage =
    '<%= command.id %> APP/tags/TAG --channel NAME --repo DIR [--sign KEY.pem] [--expires DURATION] [--require-healthy CHANNEL --prometheus URL|--puppetdb URL [--for DURATION] [--min-nodes N] [--stale-after DURATION] [--prometheus-timeout DURATION]] [--override-policy REASON]'

  static override examples = [
    '<%= config.bin %> promote foo/tags/1.1.0 --channel canary --repo /srv/www/puppet --sign release-key.pem',
    '<%= config.bin %> promote foo/tags/1.1.0 --channel stable --require-healthy canary --prometheus http://prometheus:9090 --for 30m --min-nodes 2 --repo /srv/www/puppet --sign release-key.pem',
    '<%= config.bin %> promote foo/tags/1.1.0 --channel stable --require-healthy canary --puppetdb https://puppetdb:8081 --repo /srv/www/puppet --sign release-key.pem',
  ]

  static override args = {release: Args.string({description: 'the tag the channel will name: APP/tags/TAG', required: true})}
  static override flags = {
    channel: Flags.string({description: 'the channel to move (canary, stable, any lowercase name)', required: true, helpValue: 'NAME'}),
    repo: Flags.string({description: 'the repository directory', required: true, helpValue: 'DIR'}),
    sign: Flags.string({description: 'sign index.json with this Ed25519 private key (PEM)', helpValue: 'KEY.pem'}),
    expires: Flags.string({description: 'how long nodes believe the new index (default 30d)', helpValue: 'DURATION'}),
    'require-healthy': Flags.string({description: 'first require every node following this channel to be healthy on the tag (see --prometheus)', helpValue: 'CHANNEL'}),
    prometheus: Flags.string({description: "--require-healthy or the channel's policy: the Prometheus that scrapes the nodes' metrics (http://host:9090) [default: the prometheus setting] (env LOCALPUPPET_PROMETHEUS, config prometheus)", helpValue: 'URL'}),
    puppetdb: Flags.string({description: "--require-healthy or the channel's policy: judge the nodes from their reports and localpuppet facts in this PuppetDB (https://host:8081) [default: the puppetdb setting, when no prometheus setting] (env LOCALPUPPET_PUPPETDB, config puppetdb)", helpValue: 'URL'}),
    for: Flags.string({description: '--require-healthy: how long each node must have been healthy on the tag (0s, 10m, 2h) [default: 0s]', helpValue: 'DURATION', dependsOn: ['require-healthy']}),
    'min-nodes': Flags.integer({description: '--require-healthy: at least this many healthy nodes [default: 1]', min: 1, helpValue: 'N', dependsOn: ['require-healthy']}),
    'stale-after': Flags.string({description: "--require-healthy or the channel's policy: a node whose newest attempt is older than this is stale [default: 2h]", helpValue: 'DURATION'}),
    'prometheus-timeout': Flags.string({description: "--require-healthy or the channel's policy: the time each answer of Prometheus has, whole (else 69) [default: 5m]", helpValue: 'DURATION'}),
    'override-policy': Flags.string({description: "move the channel though its policy is not met; the reason is recorded in the channel's history", helpValue: 'REASON'}),
  }

  async run(): Promise<(PromoteResult & {promoted: true; health?: ChannelHealth; policy?: PolicyVerdict}) | {promoted: false; health: ChannelHealth; policy?: PolicyVerdict}> {
    const {args, flags} = await this.parse(Promote)
    const [{promoteChannel, parsePromotion}, {parseDuration}, {checkChannelPolicy}, {renderChannelHealth}] = await Promise.all([
      import('../lib/repository/promote.js'),
      import('../lib/util/duration.js'),
      import('../lib/channels/channel-policy.js'),
      import('../cli/render/fleet-text.js'),
    ])
    const expiresInMs = flags.expires === undefined ? undefined : parseDuration(flags.expires, '--expires')
    const {app, tag} = parsePromotion(args.release, flags.channel)
    const where = `${app}/channels/${flags.channel}`
    const {source, bounds} = (await import('../cli/gate-source.js')).gateSource(flags)
    /** A gate's table is the command's output (a CI step keeping stdout keeps why it refused); a refusal is one line on stderr. */
    const refused = (why: string) => {
      process.exitCode = 1
      if (!this.jsonEnabled()) this.note(`${where} not moved: ${why}`)
    }

    let health: ChannelHealth | undefined
    if (flags['require-healthy']) {
      const {channelHealth} = await import('../lib/fleet/channel-health.js')
      const from = await source()
      if (from === null) throw new UsageError('--require-healthy needs --prometheus or --puppetdb (or the prometheus or puppetdb setting: /etc/localpuppet/config.yaml, env LOCALPUPPET_PROMETHEUS, LOCALPUPPET_PUPPETDB)')
      health = await channelHealth(from, {...bounds, app, release: `${app}/tags/${tag}`, channel: flags['require-healthy'], forMs: flags.for === undefined ? 0 : parseDuration(flags.for, '--for', {allowZero: true}), minNodes: flags['min-nodes'] ?? 1})
      if (!this.jsonEnabled()) this.log(renderChannelHealth(health))
      if (!health.ok) {
        refused(health.why)
        return {promoted: false, health}
      }
    }

    // The channel's policy, kept in the signed index, whatever the flags: judged before the lock, checked again under it.
    const policy = await checkChannelPolicy({repo: flags.repo, app, tag, channel: flags.channel, override: flags['override-policy'], prometheus: source, health: bounds})
    const unused = (['prometheus', 'puppetdb', 'stale-after', 'prometheus-timeout'] as const).find((flag) => flags[flag] !== undefined)
    if (policy.policy === null && !flags['require-healthy'] && unused) throw new UsageError(`--${unused} needs --require-healthy (or a policy on ${where}, which has none)`)
    if ('health' in policy) {
      if (!this.jsonEnabled()) this.log(renderChannelHealth(policy.health))
      if (!policy.met) {
        refused(policy.why)
        if (!this.jsonEnabled()) process.stderr.write('  hint: move it anyway, the reason recorded in its history: --override-policy REASON\n')
        return {promoted: false, health: policy.health, policy}
      }
    }

    const result = await promoteChannel({repo: flags.repo, release: args.release, channel: flags.channel, signingKey: flags.sign, expiresInMs, policy})
    if (!this.jsonEnabled()) {
      this.log(
        result.moved
          ? `${result.app}/channels/${result.channel}: ${result.previous ? `${result.previous} -> ` : ''}${result.tag}${'override' in policy ? ` (policy overridden: ${terminalText(policy.override)})` : ''}`
          : `${result.app}/channels/${result.channel} already names ${result.tag}`,
      )
      this.log(`repository ${result.repository}, index version ${result.version}, expires ${result.expires}${result.signedBy ? `, signed by ${result.signedBy}` : ''}`)
    }

    this.warnLines([expiryWarning(`index version ${result.version} of ${flags.repo}`, result.expires, Date.now())].filter((line) => line !== null))
    return {promoted: true, ...result, ...(health ? {health} : {}), ...(policy.policy ? {policy} : {})}
  }
}
