import {Args, Flags} from '@oclif/core'

import {BaseCommand, describeWithExitCodes} from '../base-command.js'
import {moduleDirFlags, sourceFlags} from '../flags.js'
import type {FetchResult} from '../lib/repository/fetch.js'

export const FETCH_EXIT_CODES = [
  {code: 0, meaning: 'fetched, or already present'},
  {code: 64, meaning: 'usage error; no source configured; plain http without a trusted key or --insecure'},
  {code: 65, meaning: 'bad signature or digest, hostile index or archive, a redirect to plain http'},
  {code: 66, meaning: 'the tag or range is not in the repository'},
  {code: 69, meaning: 'the repository cannot be reached (after retries), or lacks a file its index names'},
  {code: 73, meaning: 'a tag is installed with other content; or another install runs'},
]

export default class Fetch extends BaseCommand {
  static override summary = 'Install releases from a release repository, downloading only what the node lacks.'
  static override description = describeWithExitCodes(
    'Resolves each REF against the repository\'s index (a range picks the newest tag there), skips tags already installed ' +
      'with the same digests, downloads the rest (size and sha256 checked against the index, signatures against trusted ' +
      'keys), and installs each with the verified, atomic install. Sources: https://, http://, file:// or a directory; ' +
      'HTTPS_PROXY, HTTP_PROXY and NO_PROXY are honoured. Network faults are retried with backoff.',
    FETCH_EXIT_CODES,
  )

  static override strict = false
  static override examples = [
    '<%= config.bin %> fetch foo@^1.5 --source https://releases.example.com/puppet',
    '<%= config.bin %> fetch foo/tags/1.5.0 --source /mnt/releases --trust /etc/localpuppet/release-key.pub.pem',
    '<%= config.bin %> fetch foo@^1.5 --json',
  ]

  static override args = {ref: Args.string({description: 'a tag or range: foo/tags/1.5.0, foo@1.5.0, foo@^1.5 (several may be given)', required: true})}
  static override flags = {
    ...moduleDirFlags,
    ...sourceFlags,
    timeout: Flags.integer({description: 'give up on a request that is silent this long (connect, headers, body), in seconds; retried', min: 1, default: 30, helpValue: 'SECONDS'}),
  }

  async run(): Promise<FetchResult> {
    const {argv, flags} = await this.parse(Fetch)
    const {fetchFromSource, describeFetch} = await import('../fetch-options.js')
    const json = this.jsonEnabled()
    const result = await fetchFromSource(argv as string[], flags, {timeoutSeconds: flags.timeout, progress: !json})
    if (!json) for (const line of await describeFetch(result)) this.log(line)
    return result
  }
}
