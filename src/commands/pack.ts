import {Args, Flags} from '@oclif/core'

import {BaseCommand, describeWithExitCodes} from '../base-command.js'
import {moduleDirFlags} from '../flags.js'
import type {PackResult} from '../lib/archive/pack.js'

export default class PackCommand extends BaseCommand {
  static override summary = 'Pack a release and its modulepath into one deterministic, verifiable .tar.gz.'
  static override description = describeWithExitCodes(
    'The archive holds the release and every release on its resolved modulepath, laid out as in the module directory, ' +
      'plus release.json (every file\'s path, size, executable bit and sha256, and a digest per release). The same tree ' +
      'always gives the same bytes. --sign adds an Ed25519 signature over release.json inside the archive.',
    [
      {code: 0, meaning: 'packed'},
      {code: 64, meaning: 'usage error (e.g. the signing key is not Ed25519)'},
      {code: 65, meaning: 'mutable reference without --allow-mutable; symlink or device in a release'},
      {code: 66, meaning: 'release, module dir or key not found'},
      {code: 74, meaning: 'an I/O failure writing the archive (disk full); no partial archive is left'},
    ],
  )

  static override examples = [
    '<%= config.bin %> pack foo/tags/1.4.0',
    '<%= config.bin %> pack foo@^1.4 -o foo.tar.gz --sign release-key.pem',
    '<%= config.bin %> pack foo/tags/1.4.0 -o - | ssh node localpuppet install -',
  ]

  static override args = {ref: Args.string({description: 'the release: foo/tags/1.4.0, foo@^1.4', required: true})}
  static override flags = {
    output: Flags.string({char: 'o', description: 'the archive to write; - for standard output [default: <app>-<tag>.tar.gz]', helpValue: 'FILE'}),
    ...moduleDirFlags,
    sign: Flags.string({description: 'sign release.json with this Ed25519 private key (PEM)', helpValue: 'KEY.pem'}),
    'allow-mutable': Flags.boolean({description: 'pack a trunk or branch, or a tag depending on one'}),
  }

  async run(): Promise<Omit<PackResult, 'index'> & {digests: Record<string, string>}> {
    const {args, flags} = await this.parse(PackCommand)
    const {packRelease} = await import('../lib/archive/pack.js')
    const toStdout = flags.output === '-'
    const output = toStdout ? null : flags.output
    const result = await packRelease({moduleDir: flags['module-dir'], ref: args.ref, output, to: process.stdout, signingKey: flags.sign, allowMutable: flags['allow-mutable']})
    const digests = Object.fromEntries(result.index.releases.map((r) => [r.release, r.digest]))
    if (!this.jsonEnabled() && !toStdout) {
      this.log(`packed ${result.index.modulepath.join(', ')} into ${result.output}`)
      this.log(`  ${result.bytes} bytes, sha256 ${result.sha256}${result.signedBy ? `, signed by ${result.signedBy}` : ''}`)
    }

    const {index: _index, ...rest} = result
    return {...rest, digests}
  }
}
