import {BaseCommand, describeWithExitCodes} from '../cli/base-command.js'
import {inputArgs, runFlags} from '../cli/flags.js'
import {APPLY_EXIT_CODES} from '../lib/exit-codes.js'
import type {NodeEnc} from '../lib/run/plan-document.js'
import {runOptions} from '../cli/run-options.js'
import {terminalText} from '../lib/util/terminal-text.js'

export default class Enc extends BaseCommand {
  static override allowUntrustedHint = 'or pass --allow-untrusted to use it anyway (with a warning)'

  static override summary = "Print a node's computed ENC document: its release's layer, its layers and its input, merged."
  static override description = describeWithExitCodes(
    'Computes the document a node receives exactly as plan and apply do (the release\'s own layer.yaml, the layers the ' +
      'input names in order, then the input itself; see Layers in docs/inputs.md) and prints it as YAML, without what each run ' +
      'adds (localpuppet_release, localpuppet_run_id). --json adds the origin (layer, file, line) of every class and value ' +
      'and each layer\'s digest. With --fetch on a node whose input comes from the repository, its input and layers are ' +
      'the ones the signed index lists. Runs nothing.',
    APPLY_EXIT_CODES.filter((row) => typeof row.code === 'number' && ((row.code !== 1 && row.code < 70 && row.code !== 69) || row.code === 77)),
  )

  static override examples = ['<%= config.bin %> enc nodes/web1.yaml --layers layers/ --module-dir ./modules', '<%= config.bin %> enc --fetch --json']
  static override args = inputArgs
  static override flags = runFlags

  async run(): Promise<NodeEnc> {
    const {args, flags} = await this.parse(Enc)
    const [{planAttempt}, {planDocument}] = await Promise.all([import('../lib/attempt/plan-attempt.js'), import('../lib/run/plan-document.js')])
    const warn = (line: string) => this.warnLines([line])
    const {plan} = await planAttempt(args.input, runOptions(flags, [], false), {}, {stdin: process.stdin, warn})
    const enc = planDocument(plan)
    // dumpYaml escapes control characters but writes format characters (bidirectional overrides, zero-width) raw: each line made safe, none cut.
    if (!this.jsonEnabled()) for (const line of enc.yaml.trimEnd().split('\n')) this.log(terminalText(line, Number.POSITIVE_INFINITY))
    return enc
  }
}
