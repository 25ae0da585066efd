import {Args, Flags} from '@oclif/core'

import {BaseCommand, describeWithExitCodes} from '../cli/base-command.js'
import {moduleDirFlags, trustFlags} from '../cli/flags.js'
import {UsageError} from '../lib/errors.js'
import {INSTALL_EXIT_CODES} from '../lib/exit-codes.js'
import type {InstallResult} from '../lib/install/install-archive.js'
import {terminalText} from '../lib/util/terminal-text.js'

export default class Install extends BaseCommand {
  static override allowUntrustedHint = 'or pass --allow-untrusted to install anyway (with a warning; --json lists it as untrusted)'

  static override summary = 'Install a release archive (or a git tag) into the module directory, verified and atomically.'
  static override description = describeWithExitCodes(
    'Every entry is checked against release.json (and its signature, with --trust or keys in ' +
      '/etc/localpuppet/trusted-keys) before anything becomes visible; each release then appears with one rename, ' +
      'dependencies first. Installed tags are recorded and made read-only. A tag already installed with the same ' +
      'content is left as it is; with other content, nothing is touched (tags are immutable). With --git, the tag\'s ' +
      'tree becomes <app>/tags/<tag>.',
    INSTALL_EXIT_CODES,
  )

  static override examples = [
    '<%= config.bin %> install foo-1.4.0.tar.gz',
    '<%= config.bin %> install - --trust /etc/localpuppet/release-key.pub.pem < foo-1.4.0.tar.gz',
    '<%= config.bin %> install --git /srv/git/foo.git --app foo --tag 1.4.0',
  ]

  static override args = {archive: Args.string({description: 'the .tar.gz made by pack; - reads standard input'})}
  static override flags = {
    ...moduleDirFlags,
    ...trustFlags,
    trust: Flags.string({description: 'require a signature by this public key (PEM file, or a directory of them); repeatable (env LOCALPUPPET_TRUST, config trust)', multiple: true, helpValue: 'PUB.pem'}),
    git: Flags.string({description: 'install a git tag from this repository (path or URL) instead of an archive', helpValue: 'REPO'}),
    app: Flags.string({description: 'with --git: the app name', helpValue: 'NAME'}),
    tag: Flags.string({description: 'with --git: the tag', helpValue: 'TAG'}),
  }

  async run(): Promise<InstallResult> {
    const {args, flags} = await this.parse(Install)
    const moduleDir = flags['module-dir']
    let result: InstallResult
    if (flags.git !== undefined) {
      if (args.archive !== undefined) throw new UsageError('give an ARCHIVE or --git, not both')
      if (!flags.app || !flags.tag) throw new UsageError('--git needs --app NAME and --tag TAG')
      const {installGitTag} = await import('../lib/install/install-git.js')
      result = await installGitTag({moduleDir, repo: flags.git, app: flags.app, tag: flags.tag, allowUntrusted: flags['allow-untrusted']})
    } else {
      if (args.archive === undefined) throw new UsageError('name an ARCHIVE (or - for standard input), or use --git')
      const [{installArchive}, {openArchive}] = await Promise.all([import('../lib/install/install-archive.js'), import('../lib/install/open-archive.js')])
      const {stream, label, trustProblem} = await openArchive(args.archive)
      const {settingList} = await import('../lib/config/settings.js')
      result = await installArchive(stream, label, {moduleDir, trust: await settingList('trust', flags.trust), allowUntrusted: flags['allow-untrusted'], archiveTrustProblem: trustProblem})
    }

    this.warnUntrusted(result.untrusted)
    for (const release of result.installed) this.log(`installed ${terminalText(release)}`)
    for (const release of result.replaced) this.log(`replaced ${terminalText(release)}`)
    for (const release of result.unchanged) this.log(`unchanged ${terminalText(release)} (already installed with the same content)`)
    if (result.signedBy) this.log(`signature verified: ${terminalText(result.signedBy)}`)
    return result
  }
}
