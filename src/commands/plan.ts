import {BaseCommand, describeWithExitCodes} from '../cli/base-command.js'
import {inputArgs, runFlags} from '../cli/flags.js'
import {APPLY_EXIT_CODES} from '../lib/exit-codes.js'
import type {RunPlan} from '../lib/run/run-plan.js'
import {resolvePuppetArgs} from '../cli/run-options.js'

export default class Plan extends BaseCommand {
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
    const [{readInputText}, {parseNodeInput}, {buildRunPlan, parseFacts}, {toPlanOptions}] = await Promise.all([
      import('../lib/input/read-input.js'),
      import('../lib/input/node-input.js'),
      import('../lib/run/run-plan.js'),
      import('../cli/run-options.js'),
    ])
    const facts = parseFacts(flags.fact ?? [])
    // As apply: an input file others can write is refused (77) before it is read.
    const read = await readInputText(args.input, process.stdin, {allow: flags['allow-untrusted']})
    let input = parseNodeInput(read.text, read.source)
    let fetched = null
    let fetchUntrusted: string[] = []
    if (flags.fetch) {
      const {fetchForRun} = await import('../cli/fetch-options.js')
      ;({input, fetched, untrusted: fetchUntrusted} = await fetchForRun(input, flags, this.jsonEnabled()))
    }

    const options = toPlanOptions(flags, this.passThrough, facts, Boolean(process.stdout.isTTY) && !this.jsonEnabled(), fetched)
    const plan = await buildRunPlan(input, {...options, untrusted: [...read.untrusted, ...fetchUntrusted]})
    if (!this.jsonEnabled()) {
      const {renderPlan} = await import('../cli/render/plan-text.js')
      this.log(renderPlan(plan))
      this.warnLines(plan.warnings)
    }

    return plan
  }
}
