import {Args} from '@oclif/core'

import {BaseCommand, describeWithExitCodes} from '../../cli/base-command.js'
import {expiresInMs, indexLine, indexWriteFlags} from '../../cli/index-flags.js'
import type {ChannelBackResult} from '../../lib/channels/channel-back.js'

export default class ChannelBack extends BaseCommand {
  static override summary = 'Take a channel back to the tag it named before its current one, recorded in its history as a back.'
  static override description = describeWithExitCodes(
    "The tag comes from the channel's history in the signed index: the one the channel named before its current tag was promoted to it. " +
      'Backs walk down: after 1.3.0 -> 1.4.0 -> 1.5.0, back gives 1.4.0, back again 1.3.0. The index is rewritten as promote rewrites it, and ' +
      "the nodes following the channel take the tag on their next apply --fetch (a node that has it installed needs no download). Not gated by the " +
      "channel's policy: the tag was on the channel before.",
    [
      {code: 0, meaning: 'the channel names the previous tag'},
      {code: 64, meaning: 'not a channel (APP/channels/NAME); a signed repository without --sign'},
      {code: 65, meaning: "the repository's index is invalid, or the channel's history does not read"},
      {code: 66, meaning: 'no such channel; its history holds no earlier tag; that tag is yanked or gone; no repository there'},
      {code: 73, meaning: 'another publisher held the lock too long'},
    ],
  )

  static override examples = ['<%= config.bin %> channel back foo/channels/stable --repo /srv/www/puppet --sign release-key.pem']
  static override args = {channel: Args.string({description: 'the channel: APP/channels/NAME', required: true})}
  static override flags = indexWriteFlags

  async run(): Promise<ChannelBackResult> {
    const {args, flags} = await this.parse(ChannelBack)
    const [{channelBack}, {expiryWarning}] = await Promise.all([import('../../lib/channels/channel-back.js'), import('../../lib/repository/index-expiry.js')])
    const result = await channelBack({repo: flags.repo, channel: args.channel, signingKey: flags.sign, expiresInMs: await expiresInMs(flags.expires)})
    if (!this.jsonEnabled()) {
      this.log(`${result.channel}: ${result.from} -> ${result.to} (back)`)
      this.log(indexLine(result))
    }

    this.warnLines([expiryWarning(`index version ${result.version} of ${flags.repo}`, result.expires, Date.now())].filter((line) => line !== null))
    return result
  }
}
