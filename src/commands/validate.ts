import {Args, Flags} from '@oclif/core'

import {BaseCommand, describeWithExitCodes, untrustedExit} from '../cli/base-command.js'
import {moduleDirFlags, settingFlag} from '../cli/flags.js'
import {settingString} from '../lib/config/settings.js'
import type {ValidateReport} from '../lib/validate/report.js'

export default class Validate extends BaseCommand {
  static override summary = 'Check inputs and releases without touching a node: every problem, in one pass, for CI.'
  static override description = describeWithExitCodes(
    'For every input (files, or directories of *.yaml): YAML and schema errors, a release that cannot be resolved or ' +
      'breaks immutability or verification, classes not defined on the modulepath and class parameters they do not ' +
      'declare (with did-you-mean), Puppet syntax errors of every manifest involved, each file on its own, in ' +
      'one Puppet process, variables Puppet would not find where the release\'s mode makes that an error ' +
      '(strict_variables, strict: error), and metadata.json Puppet refuses. Each with file and line. No run record; ' +
      'nothing is written.\n\n' +
      'Classes count as defined only where Puppet\'s autoloader finds them; metaparameters (stage, require, tag...) are ' +
      "accepted on every class; a required parameter the input does not give is reported unless the module's own Hiera " +
      'data gives it (or might, on some node); a value that certainly does not match its parameter\'s type is reported.\n\n' +
      '--compile also compiles each input\'s catalog with real Puppet, as apply would (same ENC document, modulepath, ' +
      'environment and manifest), all inputs in one Puppet process, without applying anything: facts are this ' +
      "machine's, or --facts FILE (one fact set for all) or DIR (NAME.json|yaml for input NAME.yaml).",
    [
      {code: 0, meaning: 'no problems'},
      {code: 64, meaning: 'usage error'},
      {code: 65, meaning: 'problems were found (listed)'},
      {code: 66, meaning: 'an input path, the module dir, --manifest or --facts does not exist'},
      {code: 69, meaning: 'puppet cannot be run for the syntax check (--puppet none skips it) or --compile; every input is still reported'},
      untrustedExit('run as root: the puppet executable or its Ruby (or a directory or link leading to them)', false),
    ],
  )

  static override strict = false
  static override usage = '<%= command.id %> [INPUT...] [FLAGS] [-- PUPPET_ARGS...]'
  static override examples = [
    '<%= config.bin %> validate nodes/ --module-dir modules',
    '<%= config.bin %> validate nodes/*.yaml --format junit > validate.xml',
    '<%= config.bin %> validate nodes/ --compile --facts facts/ --format junit > compile.xml',
    '<%= config.bin %> validate nodes/ --layers layers/ --module-dir modules',
  ]

  static override args = {inputs: Args.string({description: 'input files or directories of them (env LOCALPUPPET_INPUT, config input) [default: /etc/puppet/input.yaml]'})}
  static override flags = {
    ...moduleDirFlags,
    format: Flags.string({description: 'output format', options: ['text', 'json', 'junit'], default: 'text'}),
    puppet: settingFlag('puppet', {description: 'the puppet executable for the syntax check and --compile; none skips the syntax check', helpValue: 'PATH', defaultHelp: 'puppet on PATH, else /opt/puppetlabs/bin/puppet'}),
    compile: Flags.boolean({description: "also compile each input's catalog with Puppet, as apply would, without applying it"}),
    facts: Flags.string({description: "--compile: a fact set for every input, or a directory with one per input name [default: this machine's facts]", helpValue: 'FILE|DIR', dependsOn: ['compile']}),
    manifest: Flags.string({description: 'the main manifest, as for apply [default: /etc/puppet/manifests/default.pp if it exists]', helpValue: 'FILE'}),
    layers: settingFlag('layers_dir', {description: 'the directory of the layers inputs name (site/dc1 is DIR/site/dc1.yaml); never read as inputs', helpValue: 'DIR', defaultHelp: 'layers/ beside each input'}),
    repo: Flags.string({description: "resolve inputs on a channel (app: foo/channels/stable) through this release repository's index [default: the channels this node last read]", helpValue: 'DIR'}),
  }

  async run(): Promise<ValidateReport> {
    this.splitPassThrough()
    const {argv, flags} = await this.parse(Validate)
    const [{validateInputs}, {checkingPuppet}, {UsageError}] = await Promise.all([
      import('../lib/validate/validate-inputs.js'),
      import('../cli/checking-puppet.js'),
      import('../lib/errors.js'),
    ])
    if (flags.puppet === 'none' && flags.compile) throw new UsageError('--compile needs puppet: --puppet none cannot be combined with it')
    const puppet = await checkingPuppet(flags.puppet)

    // As apply and plan: no INPUT is the node's own, the input setting (env, config, default).
    const inputs = argv.length > 0 ? (argv as string[]) : [(await settingString('input')) as string]
    const report = await validateInputs(inputs, {
      moduleDir: flags['module-dir'],
      puppet,
      // As apply: the arguments after `--`, else the puppet_args setting.
      puppetArgs: await (await import('../cli/run-options.js')).resolvePuppetArgs(this.passThrough),
      compile: flags.compile,
      facts: flags.facts,
      manifest: flags.manifest,
      repo: flags.repo,
      ...(flags.layers ? {layersDir: flags.layers} : {}),
    })
    const format = this.jsonEnabled() ? 'json' : flags.format
    if (format === 'json' && !this.jsonEnabled()) this.log(JSON.stringify(report, null, 2))
    if (format === 'junit') this.log((await import('../cli/render/validate-report.js')).renderValidateJunit(report))
    if (format === 'text') this.log((await import('../cli/render/validate-report.js')).renderValidateText(report))
    if (report.problems > 0) process.exitCode = 65
    if (report.puppetUnavailable !== null) {
      // The report is out (CI gets its JUnit); the syntax check and --compile did not run.
      this.note(report.puppetUnavailable)
      process.exitCode = 69
    }
    return report
  }
}
