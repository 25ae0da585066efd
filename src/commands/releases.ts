import {Args} from '@oclif/core'

import {BaseCommand, describeWithExitCodes, untrustedExit} from '../cli/base-command.js'
import {moduleDirFlags, trustFlags} from '../cli/flags.js'
import type {AppReleases} from '../lib/verify/releases.js'
import {displayPath} from '../lib/util/shell-quote.js'
import {terminalText} from '../lib/util/terminal-text.js'

export default class Releases extends BaseCommand {
  static override allowUntrustedHint = 'or pass --allow-untrusted to list anyway (with a warning)'

  static override summary = 'List apps with their trunk, branches and tags, and whether each tag verifies.'
  static override description = describeWithExitCodes('Tags are listed newest semver first. A tag installed by localpuppet has a record and is verified against it.', [
    {code: 0, meaning: 'listed'},
    {code: 66, meaning: 'module dir or app not found'},
    untrustedExit('the module dir, its .localpuppet (the records tags are verified against), a directory down to a recorded tag or anything in it'),
  ])

  static override examples = ['<%= config.bin %> releases', '<%= config.bin %> releases foo --json']
  static override args = {app: Args.string({description: 'only this app'})}
  static override flags = {
    ...moduleDirFlags,
    ...trustFlags,
  }

  async run(): Promise<AppReleases[]> {
    const {args, flags} = await this.parse(Releases)
    const {listReleases} = await import('../lib/verify/releases.js')
    // Whether a tag verifies is only as good as its record and its tree: what others can change is not believed.
    const untrusted: string[] = []
    const apps = await listReleases(flags['module-dir'], args.app, {untrusted, allowUntrusted: flags['allow-untrusted']})
    this.warnUntrusted(untrusted)
    for (const app of apps) {
      const heads = [app.trunk ? 'trunk' : null, ...app.branches.map((b) => displayPath(`branches/${b}`))].filter(Boolean)
      this.log(`${terminalText(app.app)}${heads.length > 0 ? `  (${heads.join(', ')})` : ''}`)
      for (const tag of app.tags) {
        const state = !tag.recorded ? 'no record' : tag.verified ? 'verified' : 'MODIFIED'
        this.log(`  ${displayPath(tag.tag).padEnd(20)} ${state}`)
      }
    }

    if (apps.length === 0) this.log('no apps in the module directory')
    return apps
  }
}
