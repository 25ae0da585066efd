import {Args, Flags} from '@oclif/core'

import {BaseCommand, describeWithExitCodes} from '../../cli/base-command.js'
import {expiresInMs, indexLine, indexWriteFlags} from '../../cli/index-flags.js'
import type {SetPolicyResult} from '../../lib/channels/channel-policy.js'
import {describePolicy} from '../../lib/repository/channel-records.js'
import {UsageError} from '../../lib/errors.js'

export default class ChannelPolicyCommand extends BaseCommand {
  static override summary = "Set (or --clear) a channel's policy in the signed index: every promote to it requires the nodes following another channel to be healthy on the tag."
  static override description = describeWithExitCodes(
    'With --require-healthy canary --for 30m, every promote to the channel asks Prometheus (--prometheus or the prometheus setting) whether every ' +
      'node following canary has applied the tag and its last run succeeded for 30m, at least --min-nodes of them, as promote --require-healthy ' +
      'does; if not, nothing moves (1), one line naming the policy and what was missing. promote --override-policy REASON moves it anyway, the ' +
      'reason recorded in the channel\'s history. The channel named must exist (66): a typo would shut the channel for good.',
    [
      {code: 0, meaning: 'set (or cleared)'},
      {code: 64, meaning: 'usage error: neither --require-healthy nor --clear, a channel requiring itself or closing a loop of policies, a bad duration, --for over a year or --min-nodes over 1000000; a signed repository without --sign'},
      {code: 65, meaning: "the repository's index is invalid, or a channel's history or policy in it does not read"},
      {code: 66, meaning: 'the app is not published, the channel --require-healthy names does not exist, or no repository there'},
      {code: 73, meaning: 'another publisher held the lock too long'},
    ],
  )

  static override usage = '<%= command.id %> APP/channels/NAME --repo DIR (--require-healthy CHANNEL [--for DURATION] [--min-nodes N] | --clear) [--sign KEY.pem] [--expires DURATION]'
  static override examples = [
    '<%= config.bin %> channel policy foo/channels/stable --require-healthy canary --for 30m --min-nodes 2 --repo /srv/www/puppet --sign release-key.pem',
    '<%= config.bin %> channel policy foo/channels/stable --clear --repo /srv/www/puppet --sign release-key.pem',
  ]

  static override args = {channel: Args.string({description: 'the channel the policy guards: APP/channels/NAME', required: true})}
  static override flags = {
    'require-healthy': Flags.string({description: 'every promote requires the nodes following this channel of the app to be healthy on the tag', helpValue: 'CHANNEL', exclusive: ['clear']}),
    for: Flags.string({description: 'how long each must have been healthy on it (0s, 30m, 2h) [default: 0s]', helpValue: 'DURATION', dependsOn: ['require-healthy']}),
    'min-nodes': Flags.integer({description: 'at least this many healthy nodes [default: 1]', min: 1, helpValue: 'N', dependsOn: ['require-healthy']}),
    clear: Flags.boolean({description: "remove the channel's policy"}),
    ...indexWriteFlags,
  }

  async run(): Promise<SetPolicyResult> {
    const {args, flags} = await this.parse(ChannelPolicyCommand)
    const [{setChannelPolicy}, {parseDuration}, {usageChannelName}] = await Promise.all([
      import('../../lib/channels/channel-policy.js'),
      import('../../lib/util/duration.js'),
      import('../../lib/release/release-ref.js'),
    ])
    if (!flags.clear && flags['require-healthy'] === undefined) throw new UsageError('give --require-healthy CHANNEL (the policy) or --clear')
    const policy = flags.clear
      ? null
      : {
          requireHealthy: usageChannelName(flags['require-healthy']!, '--require-healthy'),
          forMs: flags.for === undefined ? 0 : parseDuration(flags.for, '--for', {allowZero: true}),
          minNodes: flags['min-nodes'] ?? 1,
        }
    const result = await setChannelPolicy({repo: flags.repo, channel: args.channel, policy, signingKey: flags.sign, expiresInMs: await expiresInMs(flags.expires)})
    if (!this.jsonEnabled()) {
      this.log(`${result.channel}: ${result.policy ? `policy: ${describePolicy(result.policy)}` : result.previous ? 'policy removed' : 'had no policy'}`)
      this.log(indexLine(result))
    }

    return result
  }
}
