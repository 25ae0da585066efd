import {Args, Flags} from '@oclif/core'

import {BaseCommand, describeWithExitCodes} from '../base-command.js'
import {moduleDirFlags, settingFlag} from '../flags.js'
import type {ValidateReport} from '../lib/validate/validate-inputs.js'

export default class Validate extends BaseCommand {
  static override summary = 'Check inputs and releases without touching a node: every problem, in one pass, for CI.'
  static override description = describeWithExitCodes(
    'For every input (files, or directories of *.yaml): YAML and schema errors, a release that cannot be resolved or ' +
      'breaks immutability or verification, classes not defined on the modulepath and class parameters they do not ' +
      'declare (with did-you-mean), and Puppet syntax errors from one `puppet parser validate` over every manifest ' +
      'involved. Each with file and line. No run record; nothing is written.',
    [
      {code: 0, meaning: 'no problems'},
      {code: 64, meaning: 'usage error'},
      {code: 65, meaning: 'problems were found (listed)'},
      {code: 66, meaning: 'an input path or the module dir does not exist'},
      {code: 69, meaning: 'puppet is not available for the syntax check (--puppet none skips it)'},
    ],
  )

  static override strict = false
  static override usage = '<%= command.id %> [INPUT...] [FLAGS] [-- PUPPET_ARGS...]'
  static override examples = [
    '<%= config.bin %> validate nodes/ --module-dir modules',
    '<%= config.bin %> validate nodes/*.yaml --format junit > validate.xml',
  ]

  static override args = {inputs: Args.string({description: 'input files or directories of them [default: /etc/puppet/input.yaml]'})}
  static override flags = {
    ...moduleDirFlags,
    format: Flags.string({description: 'output format', options: ['text', 'json', 'junit'], default: 'text'}),
    puppet: settingFlag('puppet', {description: 'the puppet executable for the syntax check; none skips it', helpValue: 'PATH', defaultHelp: 'puppet'}),
  }

  async run(): Promise<ValidateReport> {
    this.splitPassThrough()
    const {argv, flags} = await this.parse(Validate)
    const [{validateInputs}, {findExecutable}, {PuppetUnavailableError}] = await Promise.all([
      import('../lib/validate/validate-inputs.js'),
      import('../lib/puppet/find-executable.js'),
      import('../lib/errors.js'),
    ])
    let puppet: string | null = null
    if (flags.puppet !== 'none') {
      puppet = findExecutable(flags.puppet)
      if (puppet === null) throw new PuppetUnavailableError(`puppet not found: ${flags.puppet}`, ['install it, or pass --puppet none to skip the syntax check'])
    }

    const inputs = argv.length > 0 ? (argv as string[]) : ['/etc/puppet/input.yaml']
    const report = await validateInputs(inputs, {moduleDir: flags['module-dir'], puppet, puppetArgs: this.passThrough})
    const format = this.jsonEnabled() ? 'json' : flags.format
    if (format === 'json' && !this.jsonEnabled()) this.log(JSON.stringify(report, null, 2))
    if (format === 'junit') this.log((await import('../render/validate-report.js')).renderValidateJunit(report))
    if (format === 'text') this.log((await import('../render/validate-report.js')).renderValidateText(report))
    if (report.problems > 0) process.exitCode = 65
    return report
  }
}
