import {Args} from '@oclif/core'

import {BaseCommand, describeWithExitCodes, untrustedExit} from '../cli/base-command.js'
import {moduleDirFlags, trustFlags} from '../cli/flags.js'
import type {VerifyResult} from '../lib/verify/verify.js'
import {displayPath} from '../lib/util/shell-quote.js'
import {terminalText} from '../lib/util/terminal-text.js'

export default class Verify extends BaseCommand {
  static override allowUntrustedHint = 'or pass --allow-untrusted to report anyway (with a warning; --json lists it as untrusted)'

  static override summary = 'Check installed tags against what was installed: modified, missing and extra files.'
  static override description = describeWithExitCodes(
    'Recomputes every installed tag (or the ones named) against its install record. A modified file that other installed tags hold as the same file ' +
      '(fetch shares files by hard links) is named with those tags; on a mismatch, the repair (remove the tags, fetch them again) goes to standard error.',
    [
    {code: 0, meaning: 'every tag checked matches its record'},
    {code: 65, meaning: 'a mismatch (listed), or a named tag has no record'},
    {code: 66, meaning: 'module dir not found'},
    untrustedExit('the module dir, its .localpuppet (the records tags are verified against), a directory down to a tag or anything in it'),
    ],
  )

  static override strict = false
  static override examples = ['<%= config.bin %> verify', '<%= config.bin %> verify foo/tags/1.4.0 --json']
  static override args = {refs: Args.string({description: 'tags to verify (foo/tags/1.4.0 or foo@1.4.0) [default: all with a record]'})}
  static override flags = {
    ...moduleDirFlags,
    ...trustFlags,
  }

  async run(): Promise<VerifyResult[]> {
    const {argv, flags} = await this.parse(Verify)
    const {verifyInstalled} = await import('../lib/verify/verify-installed.js')
    const {results, untrusted} = await verifyInstalled(flags['module-dir'], argv as string[], {allowUntrusted: flags['allow-untrusted']})
    this.warnUntrusted(untrusted)
    for (const result of results) {
      if (!result.recorded) this.log(`${terminalText(result.release)}: no install record (not installed by localpuppet)`)
      else if (result.ok) this.log(`ok        ${terminalText(result.release)}`)
      else {
        this.log(`MISMATCH  ${terminalText(result.release)}`)
        for (const path of result.modified) this.log(`  modified  ${displayPath(path)}${sharedNote(result.sharedWith?.[path])}`)
        for (const path of result.missing) this.log(`  missing   ${displayPath(path)}`)
        for (const path of result.extra) this.log(`  extra     ${displayPath(path)}`)
      }
    }

    if (results.length === 0) this.log('no installed tags with records')
    const broken = [...new Set(results.filter((result) => result.recorded && !result.ok).flatMap((result) => [result.release, ...Object.values(result.sharedWith ?? {}).flat()]))]
    if (broken.length > 0) {
      const {repairRecipe} = await import('../lib/verify/shared-files.js')
      this.warnLines([repairRecipe(flags['module-dir'], broken)])
    }

    if (results.some((result) => !result.ok || !result.recorded)) process.exitCode = 65
    return results
  }
}

/** ` (the same file as in foo/tags/1.5.0)`: a file fetch shared (hard-linked) with other installed tags is changed in those too. */
function sharedNote(tags: string[] | undefined): string {
  return tags === undefined ? '' : ` (the same file as in ${tags.map((tag) => terminalText(tag)).join(', ')}: changed there too)`
}
