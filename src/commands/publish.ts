import {Args, Flags} from '@oclif/core'

import {BaseCommand, describeWithExitCodes} from '../cli/base-command.js'
import type {PublishResult} from '../lib/repository/publish.js'

export default class Publish extends BaseCommand {
  static override summary = 'Add archives made by pack to a release repository: a directory any web server can serve.'
  static override description = describeWithExitCodes(
    'Verifies each archive in full, copies it under archives/<app>/ and then replaces index.json atomically (temp file, ' +
      'fsync, rename), so a reader never sees an index naming an archive that is not there. Publishers of one repository ' +
      'take turns (a lock), so none loses another\'s tags. A tag already published with the same content is left as it ' +
      'is; with other content nothing changes (tags are immutable). --sign writes index.json.sig (Ed25519, the same keys ' +
      'as pack --sign).',
    [
      {code: 0, meaning: 'published, or already published with the same content'},
      {code: 64, meaning: 'usage error; the signing key is not Ed25519; a signed repository without --sign'},
      {code: 65, meaning: 'an archive is corrupt, unsafe or mutable; the repository\'s index is invalid'},
      {code: 66, meaning: 'an archive or key not found'},
      {code: 73, meaning: 'a tag is already published with other content; another publisher held the lock too long'},
    ],
  )

  static override strict = false
  static override examples = [
    '<%= config.bin %> publish foo-1.5.0.tar.gz --repo /srv/www/puppet',
    '<%= config.bin %> publish dist/*.tar.gz --repo /srv/www/puppet --sign release-key.pem --json',
  ]

  static override args = {archive: Args.string({description: 'archives made by localpuppet pack (several may be given)', required: true})}
  static override flags = {
    repo: Flags.string({description: 'the repository directory (created when missing)', required: true, helpValue: 'DIR'}),
    sign: Flags.string({description: 'sign index.json with this Ed25519 private key (PEM)', helpValue: 'KEY.pem'}),
  }

  async run(): Promise<PublishResult> {
    const {argv, flags} = await this.parse(Publish)
    const {publishArchives} = await import('../lib/repository/publish.js')
    const result = await publishArchives({repo: flags.repo, archives: argv as string[], signingKey: flags.sign})
    if (!this.jsonEnabled()) {
      for (const r of result.releases) this.log(r.status === 'added' ? `published ${r.release} as ${r.archive}` : `unchanged ${r.release} (already published with the same content)`)
      if (result.signedBy) this.log(`index signed by ${result.signedBy}`)
    }

    return result
  }
}
