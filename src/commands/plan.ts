import {BaseCommand, describeWithExitCodes} from '../cli/base-command.js'
import {inputArgs, runFlags} from '../cli/flags.js'
import {APPLY_EXIT_CODES} from '../lib/exit-codes.js'
import type {RunPlan} from '../lib/run/run-plan.js'
import type {FetchResult} from '../lib/source/release-source.js'
import {resolvePuppetArgs, runOptions} from '../cli/run-options.js'

export default class Plan extends BaseCommand {
  static override allowUntrustedHint = 'or pass --allow-untrusted to use it anyway (with a warning; apply records it in the run record)'

  static override summary = 'Show what apply would run: the release, modulepath, ENC document and puppet command. Runs nothing.'
  static override description = describeWithExitCodes(
    'Builds exactly the plan `apply` executes and prints it: the resolved release, the real modulepath, the ENC document ' +
      'Puppet will receive and the exact puppet command. Creates no run record and starts nothing; `<run-id>` stands ' +
      'where apply puts the new run\'s id. Exit codes are those of apply before it starts puppet.',
    APPLY_EXIT_CODES.filter((row) => typeof row.code === 'number' && ((row.code !== 1 && row.code < 70 && row.code !== 69) || row.code === 77)),
  )

  static override usage = '<%= command.id %> [INPUT] [FLAGS] [-- PUPPET_ARGS...]'

  static override examples = ['<%= config.bin %> plan', '<%= config.bin %> plan input.yaml --module-dir ./modules --json']

  static override args = inputArgs

  static override flags = runFlags

  async run(): Promise<RunPlan> {
    this.splitPassThrough()
    const {args, flags} = await this.parse(Plan)
    this.passThrough = await resolvePuppetArgs(this.passThrough)
    const [{planAttempt}, {parseFacts}, {describeFetch, downloadProgress}] = await Promise.all([
      import('../lib/attempt/plan-attempt.js'),
      import('../lib/run/run-plan.js'),
      import('../cli/fetch-options.js'),
    ])
    const json = this.jsonEnabled()
    const facts = parseFacts(flags.fact ?? [])
    const options = runOptions(flags, this.passThrough, Boolean(process.stdout.isTTY) && !json)
    const say = (line: string) => this.note(line)
    const warn = (line: string) => this.warnLines([line])
    const io = json ? {stdin: process.stdin, warn} : {stdin: process.stdin, warn, progress: downloadProgress(true), fetched: (result: FetchResult) => describeFetch(result).forEach(say)}
    const {plan} = await planAttempt(args.input, options, facts, io)
    if (!json) {
      const {renderPlan} = await import('../cli/render/plan-text.js')
      this.log(renderPlan(plan))
      this.warnLines(plan.warnings)
    }

    return plan
  }
}
