import {Flags} from '@oclif/core'

import {BaseCommand, describeWithExitCodes} from '../../cli/base-command.js'
import type {RepositoryListing} from '../../lib/channels/repository-listing.js'

export default class RepositoryList extends BaseCommand {
  static override summary = "List a release repository: its tags (yanked ones with when and why), channels with their tag and policy, node inputs, and the index's version, expiry, id and signing key."
  static override description = describeWithExitCodes(
    "Reads the publisher's copy of the repository (the directory publish writes), nothing changed. Tags newest first (the " +
      `newest 20 of each app and every yanked one; --json lists all), each channel's tag, policy and how many moves its history keeps ` +
      '(channel history shows them), the number of node inputs (--json names them with their app).',
    [
      {code: 0, meaning: 'listed'},
      {code: 65, meaning: "the repository's index is invalid, or a channel's history or policy in it does not read (the entry is named)"},
      {code: 66, meaning: 'no repository there (no index.json)'},
    ],
  )

  static override examples = ['<%= config.bin %> repository list --repo /srv/www/puppet', '<%= config.bin %> repository list --repo /srv/www/puppet --json']
  static override flags = {repo: Flags.string({description: 'the repository directory', required: true, helpValue: 'DIR'})}

  async run(): Promise<RepositoryListing> {
    const {flags} = await this.parse(RepositoryList)
    const [{listRepository}, {renderRepositoryListing}, {expiryWarning}] = await Promise.all([
      import('../../lib/channels/repository-listing.js'),
      import('../../cli/render/channel-text.js'),
      import('../../lib/repository/index-expiry.js'),
    ])
    const listing = await listRepository(flags.repo)
    if (!this.jsonEnabled()) this.log(renderRepositoryListing(listing))
    this.warnLines([expiryWarning(`index version ${listing.version} of ${flags.repo}`, listing.expires, Date.now())].filter((line) => line !== null))
    return listing
  }
}
