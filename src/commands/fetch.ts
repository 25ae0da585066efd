import {Args, Flags} from '@oclif/core'

import {BaseCommand, describeWithExitCodes} from '../cli/base-command.js'
import {moduleDirFlags, sourceFlags, trustFlags} from '../cli/flags.js'
import {FETCH_EXIT_CODES} from '../lib/exit-codes.js'
import type {FetchResult} from '../lib/source/release-source.js'

export default class Fetch extends BaseCommand {
  static override allowUntrustedHint = 'or pass --allow-untrusted to fetch anyway (with a warning; --json lists it as untrusted)'

  static override summary = 'Install releases from a release repository, downloading only what the node lacks.'
  static override description = describeWithExitCodes(
    'Resolves each REF against the repository\'s index (a range picks the newest tag there, a channel the tag it names), skips tags already installed ' +
      'with the same digests, downloads the rest (size and sha256 checked against the index, signatures against trusted ' +
      'keys), and installs each with the verified, atomic install. Sources: https://, http://, file:// or a directory; ' +
      'or apt: packages made by pack --format deb, installed with apt-get and checked by apt\'s own signatures; ' +
      'HTTPS_PROXY, HTTP_PROXY and NO_PROXY are honoured. Network faults are retried with backoff. The first index a node ' +
      'accepts from a source pins its repository id; with --repository-id (or the repository_id setting) the node knows ' +
      'the id before first contact, and refuses an index of any other.',
    FETCH_EXIT_CODES,
  )

  static override strict = false
  static override examples = [
    '<%= config.bin %> fetch foo@^1.5 --source https://releases.example.com/puppet',
    '<%= config.bin %> fetch foo/tags/1.5.0 --source /mnt/releases --trust /etc/localpuppet/release-key.pub.pem',
    '<%= config.bin %> fetch foo@^1.5 --json',
  ]

  static override args = {ref: Args.string({description: 'a tag, range or channel: foo/tags/1.5.0, foo@1.5.0, foo@^1.5, foo/channels/stable (several may be given)', required: true})}
  static override flags = {
    ...moduleDirFlags,
    ...sourceFlags,
    ...trustFlags,
    'accept-repository': Flags.string({
      description: "accept the repository with this id at the source in place of the one this node pinned (a repository re-created on purpose; its versions start afresh): the id is the repository field of its index.json, read on the publisher's side",
      helpValue: 'ID',
    }),
    'repository-id': Flags.string({
      description: "the id the source's repository must have (the repository field of its index.json, read on the publisher's side): an index with another is refused, even on first contact; default: the repository_id setting",
      helpValue: 'ID',
    }),
    timeout: Flags.integer({description: 'give up on a request that is silent this long (connect, headers, body), or whose body brings less than 16 KiB/s over that long, in seconds; retried', min: 1, default: 30, helpValue: 'SECONDS'}),
  }

  async run(): Promise<FetchResult> {
    const {argv, flags} = await this.parse(Fetch)
    const {fetchFromSource, describeFetch} = await import('../cli/fetch-options.js')
    const json = this.jsonEnabled()
    const result = await fetchFromSource(argv as string[], flags, {timeoutSeconds: flags.timeout, progress: !json})
    this.warnUntrusted(result.untrusted ?? [])
    this.warnLines(result.warnings ?? [])
    if (!json) for (const line of describeFetch(result)) this.log(line)
    return result
  }
}
