import {Args, Flags} from '@oclif/core'

import {BaseCommand, describeWithExitCodes} from '../../cli/base-command.js'
import type {ChannelHistory} from '../../lib/channels/repository-listing.js'

export default class ChannelHistoryCommand extends BaseCommand {
  static override summary = "Show a channel's moves as the signed index records them: from, to, when, by which key, and any policy override."
  static override description = describeWithExitCodes(
    'Newest first. Every promote that moves the channel and every channel back is recorded in the index (the last 50 moves of each channel: ' +
      'older ones are dropped by the move that would make one more), signed with the index, so the record is as good as the index.',
    [
      {code: 0, meaning: 'shown'},
      {code: 64, meaning: 'not a channel (APP/channels/NAME)'},
      {code: 65, meaning: "the repository's index is invalid, or the channel's history does not read (the entry is named)"},
      {code: 66, meaning: 'no such channel, or no repository there'},
    ],
  )

  static override examples = ['<%= config.bin %> channel history foo/channels/stable --repo /srv/www/puppet', '<%= config.bin %> channel history foo/channels/stable --repo /srv/www/puppet --json']
  static override args = {channel: Args.string({description: 'the channel: APP/channels/NAME', required: true})}
  static override flags = {repo: Flags.string({description: 'the repository directory', required: true, helpValue: 'DIR'})}

  async run(): Promise<ChannelHistory> {
    const {args, flags} = await this.parse(ChannelHistoryCommand)
    const [{channelHistory}, {renderChannelHistory}] = await Promise.all([import('../../lib/channels/repository-listing.js'), import('../../cli/render/channel-text.js')])
    const history = await channelHistory(flags.repo, args.channel)
    if (!this.jsonEnabled()) this.log(renderChannelHistory(history))
    return history
  }
}
