import {Args, Flags} from '@oclif/core'

import {BaseCommand, describeWithExitCodes} from '../../cli/base-command.js'
import {expiresInMs, indexLine, indexWriteFlags} from '../../cli/index-flags.js'
import type {YankResult} from '../../lib/channels/yank.js'
import {terminalText} from '../../lib/util/terminal-text.js'

export default class RepositoryYank extends BaseCommand {
  static override summary = 'Yank a published tag: no channel or node input may name it any more and nodes do not newly install it; it stays listed, with when and why.'
  static override description = describeWithExitCodes(
    "Marks the tag yanked in the signed index (rewritten as publish rewrites it). From then on promote, channel back and publish --node refuse " +
      'it (66, naming the yank), a range no longer resolves to it (the newest match that is not yanked), and fetch and apply --fetch refuse to ' +
      'install it (66); a node that already has it installed keeps running it, with a warning, until its input or channel moves. Refused (73) ' +
      'while a channel or a node input names it: move them first (channel back, promote, publish --node). A yank is for good: publish a new tag.',
    [
      {code: 0, meaning: 'yanked (or yanked already: its first record kept)'},
      {code: 64, meaning: 'usage error: not an exact tag, no --reason, a reason that is not one line of at most 500 characters; a signed repository without --sign'},
      {code: 65, meaning: "the repository's index (or a channel's history or policy in it) is invalid"},
      {code: 66, meaning: 'the tag is not published, or no repository there'},
      {code: 73, meaning: 'a channel or a node input names the tag; another publisher held the lock too long'},
    ],
  )

  static override examples = ['<%= config.bin %> repository yank foo/tags/1.5.0 --reason "breaks nginx on port 8080" --repo /srv/www/puppet --sign release-key.pem']
  static override args = {release: Args.string({description: 'the tag to yank: APP/tags/TAG', required: true})}
  static override flags = {
    reason: Flags.string({description: 'why (recorded in the signed index and listed)', required: true, helpValue: 'TEXT'}),
    ...indexWriteFlags,
  }

  async run(): Promise<YankResult> {
    const {args, flags} = await this.parse(RepositoryYank)
    const {yankTag} = await import('../../lib/channels/yank.js')
    const result = await yankTag({repo: flags.repo, release: args.release, reason: flags.reason, signingKey: flags.sign, expiresInMs: await expiresInMs(flags.expires)})
    if (!this.jsonEnabled()) {
      this.log(terminalText(`${result.release} ${result.changed ? 'yanked' : 'was yanked already'} (${result.yanked.at}: ${result.yanked.reason})`))
      this.log(indexLine(result))
    }

    return result
  }
}
