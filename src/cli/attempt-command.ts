import type {AttemptIo} from '../lib/attempt/attempt.js'
import type {RunPlan} from '../lib/run/run-plan.js'
import type {RunRecord} from '../lib/state/run-record.js'
import {BaseCommand} from './base-command.js'
import {type AttemptFlagValues, attemptOptions, resolvePuppetArgs} from './run-options.js'

/** apply and rollback: one attempt (lib/attempt), and what a person sees of it. */
export abstract class AttemptCommand extends BaseCommand {
  static override allowUntrustedHint = 'or pass --allow-untrusted to use it anyway (with a warning; the run record lists it)'

  /** Runs the attempt, sets the exit code, returns the record (--json prints it). `planned` sees the plan before it runs. */
  protected async runAttempt(input: string, flags: AttemptFlagValues, planned?: (plan: RunPlan) => void): Promise<RunRecord> {
    const puppetArgs = await resolvePuppetArgs(this.passThrough)
    this.passThrough = puppetArgs
    const {attempt} = await import('../lib/attempt/attempt.js')
    const color = Boolean(process.stdout.isTTY) && !this.jsonEnabled() && !flags.detach
    const result = await attempt(input, attemptOptions(flags, puppetArgs, color), await this.attemptIo(planned, flags.save ? input : null))
    process.exitCode = result.exitCode
    return result.record
  }

  /** `apply --detached-child`: the background half of --detach. */
  protected async runInBackground(): Promise<RunRecord> {
    const {attemptInBackground} = await import('../lib/attempt/background.js')
    const result = await attemptInBackground({warn: (line) => this.warnLines([line])})
    process.exitCode = result.exitCode
    return result.record
  }

  /** With --json: warnings only. Otherwise: puppet's output, progress, and a line for each step on stderr (the run id alone on stdout for --detach). */
  private async attemptIo(planned?: (plan: RunPlan) => void, saving: string | null = null): Promise<AttemptIo> {
    const base = {stdin: process.stdin, entry: `${this.config.root}/bin/run.js`, warn: (line: string) => this.warnLines([line])}
    if (this.jsonEnabled()) return base
    const [{describeFetch, downloadProgress}, {renderRunOutcome}, {terminalChunks}] = await Promise.all([import('./fetch-options.js'), import('./render/run-text.js'), import('./render/log-text.js')])
    // Puppet's output as it comes, shown as `log` shows it later (the log keeps the bytes).
    const streams = {stdout: terminalChunks(), stderr: terminalChunks()}
    const say = (line: string) => this.note(line)
    return {
      ...base,
      progress: downloadProgress(true),
      fetched: (result) => describeFetch(result).forEach(say),
      planned,
      started: (record, plan, {detached}) => {
        this.warnLines(plan.warnings)
        if (!detached) return say(`run ${record.id}: ${record.release}${record.splaySeconds ? ` (splay: waiting ${record.splaySeconds}s)` : ''}`)
        this.log(record.id)
        say(`run ${record.id} of ${record.release} started in the background; localpuppet status ${record.id} --wait`)
      },
      output: (chunk, stream) => process[stream].write(streams[stream](chunk)),
      finished: (record) => {
        process.stderr.write(renderRunOutcome(record) + '\n')
        // --save moves the pointer only when the run succeeded: say when it did not.
        if (saving !== null && !record.saved) say(`--save: ${saving} was left as it was (the run ${record.state}); the next run applies what it names`)
      },
    }
  }
}
