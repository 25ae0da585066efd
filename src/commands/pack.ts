import {Args, Flags} from '@oclif/core'

import {BaseCommand, describeWithExitCodes} from '../cli/base-command.js'
import {moduleDirFlags} from '../cli/flags.js'
import type {PackResult} from '../lib/archive/pack.js'
import type {DebPackResult} from '../lib/deb/build-deb.js'
import {UsageError} from '../lib/errors.js'
import {terminalText} from '../lib/util/terminal-text.js'

export default class PackCommand extends BaseCommand {
  static override summary = 'Pack a release and its modulepath into one deterministic, verifiable .tar.gz.'
  static override description = describeWithExitCodes(
    'The archive holds the release and every release on its resolved modulepath, laid out as in the module directory, ' +
      'plus release.json (every file\'s path, size, executable bit and sha256, and a digest per release). The same tree ' +
      'always gives the same bytes. --sign adds an Ed25519 signature over release.json inside the archive. ' +
      '--format deb writes one Debian package per release on the modulepath instead (localpuppet-<app>-<tag>, same bytes ' +
      'for the same tree), installing it under --node-module-dir with its install record; -o is then a directory. Packages are ' +
      'signed by the apt repository that serves them, not by pack.',
    [
      {code: 0, meaning: 'packed'},
      {code: 64, meaning: 'usage error (e.g. the signing key is not Ed25519; --sign with --format deb)'},
      {code: 65, meaning: 'mutable reference without --allow-mutable (always, for deb); symlink or device in a release; an app or tag with no unambiguous Debian name'},
      {code: 66, meaning: 'release, module dir, output directory or key not found'},
      {code: 74, meaning: 'an I/O failure writing the archive (disk full); no partial archive is left'},
    ],
  )

  static override examples = [
    '<%= config.bin %> pack foo/tags/1.4.0',
    '<%= config.bin %> pack foo@^1.4 -o foo.tar.gz --sign release-key.pem',
    '<%= config.bin %> pack foo/tags/1.4.0 -o - | ssh node localpuppet install -',
    '<%= config.bin %> pack foo@^1.4 --format deb -o /srv/apt/incoming',
  ]

  static override args = {ref: Args.string({description: 'the release: foo/tags/1.4.0, foo@^1.4', required: true})}
  static override flags = {
    output: Flags.string({char: 'o', description: 'the archive to write; - for standard output [default: <app>-<tag>.tar.gz]; with --format deb, the directory for the .deb files [default: .]', helpValue: 'FILE'}),
    format: Flags.string({description: 'tar: one .tar.gz for install and fetch; deb: one Debian package per release for dpkg and apt', options: ['tar', 'deb'], default: 'tar'}),
    'node-module-dir': Flags.string({description: 'with --format deb: the module directory the packages install into on the node [default: /etc/puppet/modules]', helpValue: 'DIR'}),
    ...moduleDirFlags,
    sign: Flags.string({description: 'sign release.json with this Ed25519 private key (PEM)', helpValue: 'KEY.pem'}),
    'allow-mutable': Flags.boolean({description: 'pack a trunk or branch, or a tag depending on one'}),
  }

  async run(): Promise<(Omit<PackResult, 'index'> & {digests: Record<string, string>}) | (DebPackResult & {format: 'deb'})> {
    const {args, flags} = await this.parse(PackCommand)
    if (flags.format === 'deb') return this.packDeb(args.ref, flags)
    if (flags['node-module-dir'] !== undefined) throw new UsageError('--node-module-dir is for --format deb; an archive installs wherever install puts it')
    const {packRelease} = await import('../lib/archive/pack.js')
    const toStdout = flags.output === '-'
    const output = toStdout ? null : flags.output
    const result = await packRelease({moduleDir: flags['module-dir'], ref: args.ref, output, to: process.stdout, signingKey: flags.sign, allowMutable: flags['allow-mutable']})
    const digests = Object.fromEntries(result.index.releases.map((r) => [r.release, r.digest]))
    if (!this.jsonEnabled() && !toStdout) {
      this.log(terminalText(`packed ${result.index.modulepath.join(', ')} into ${result.output}`))
      this.log(`  ${terminalText(`${result.bytes} bytes, sha256 ${result.sha256}${result.signedBy ? `, signed by ${result.signedBy}` : ''}`)}`)
    }

    const {index: _index, ...rest} = result
    return {...rest, digests}
  }

  private async packDeb(ref: string, flags: {output?: string; sign?: string; 'allow-mutable'?: boolean; 'module-dir': string; 'node-module-dir'?: string}): Promise<DebPackResult & {format: 'deb'}> {
    if (flags.sign !== undefined) throw new UsageError('--sign is for archives: Debian packages are signed by the apt repository that serves them (its Release file)')
    if (flags['allow-mutable']) throw new UsageError('--allow-mutable is for archives: a package is named after its tag, and so is every package it depends on')
    if (flags.output === '-') throw new UsageError('--format deb writes one file per release: -o names a directory')
    const {packDebs} = await import('../lib/deb/build-deb.js')
    const result = await packDebs({moduleDir: flags['module-dir'], ref, outputDir: flags.output, nodeModuleDir: flags['node-module-dir']})
    for (const item of result.packages) this.log(terminalText(`packed ${item.release} into ${item.file}${item.depends.length > 0 ? ` (depends on ${item.depends.join(', ')})` : ''}`))
    return {format: 'deb', ...result}
  }
}
