import {Flags} from '@oclif/core'

import {BaseCommand, describeWithExitCodes} from '../../cli/base-command.js'
import {sourceFlags} from '../../cli/flags.js'
import type {RepositoryListing} from '../../lib/channels/repository-listing.js'
import {UsageError} from '../../lib/errors.js'

export default class RepositoryList extends BaseCommand {
  static override summary = "List a release repository: its tags (yanked ones with when and why), channels with their tag and policy, node inputs, and the index's version, expiry, id and signing key."
  static override description = describeWithExitCodes(
    "--repo DIR reads the publisher's copy (the directory publish writes); --source URL|DIR reads the repository as a node reads it " +
      "(its signature verified with the trusted keys, judged fresh against what this machine accepted, remembered nowhere). Nothing is changed. Tags newest first (the " +
      `newest 20 of each app and every yanked one; --json lists all), each channel's tag, policy and how many moves its history keeps ` +
      '(channel history shows them), the number of node inputs (--json names them with their app) and where they are listed: ' +
      'in index.json, or each in its node\'s own document (publish --node-documents-only: --repo counts them from the documents, --source cannot and says "not listed").',
    [
      {code: 0, meaning: 'listed'},
      {code: 64, meaning: 'neither or both of --repo and --source; --source: plain http with no trusted key and no --insecure'},
      {code: 65, meaning: "the repository's index is invalid, or a channel's history or policy in it does not read (the entry is named); --source: as fetch's 65 (a bad signature, a replayed or expired index)"},
      {code: 66, meaning: 'no repository there (no index.json)'},
      {code: 69, meaning: '--source: the repository cannot be reached'},
    ],
  )

  static override usage = '<%= command.id %> --repo DIR | --source URL|DIR [--trust PUB.pem ...] [--insecure]'
  static override examples = [
    '<%= config.bin %> repository list --repo /srv/www/puppet',
    '<%= config.bin %> repository list --source https://releases.example.com/puppet --trust release-key.pub.pem --json',
  ]

  static override flags = {
    repo: Flags.string({description: "the repository directory (the publisher's copy)", helpValue: 'DIR', exclusive: ['source']}),
    source: Flags.string({description: 'the repository as nodes read it: https://, http://, file:// or a directory', helpValue: 'URL|DIR'}),
    trust: sourceFlags.trust,
    insecure: sourceFlags.insecure,
  }

  async run(): Promise<RepositoryListing> {
    const {flags} = await this.parse(RepositoryList)
    const [{listRepository, listServedRepository}, {renderRepositoryListing}, {expiryWarning}] = await Promise.all([
      import('../../lib/channels/repository-listing.js'),
      import('../../cli/render/channel-text.js'),
      import('../../lib/repository/index-expiry.js'),
    ])
    if (flags.repo === undefined && flags.source === undefined) throw new UsageError('give --repo DIR (the publisher\'s copy) or --source URL|DIR (as nodes read it)')
    const listing = flags.repo === undefined ? await listServedRepository({source: flags.source!, trust: flags.trust, insecure: flags.insecure}) : await listRepository(flags.repo)
    if (!this.jsonEnabled()) this.log(renderRepositoryListing(listing))
    // Read as a node reads it, the index's own warnings (its expiry among them); the publisher's copy, its expiry.
    const warnings = (listing as {warnings?: string[]}).warnings ?? [expiryWarning(`index version ${listing.version} of ${listing.repo}`, listing.expires, Date.now())]
    this.warnLines(warnings.filter((line) => line !== null))
    return listing
  }
}
