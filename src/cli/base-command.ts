import {Command, Errors} from '@oclif/core'

import {LocalpuppetError} from '../lib/errors.js'
import {closest} from '../lib/util/did-you-mean.js'
import {asIoError} from '../lib/util/io-error.js'
import {ALLOW_HINT} from '../lib/util/trusted-path.js'
import {ExitCode, type ExitCodeRow, renderExitCodes} from '../lib/exit-codes.js'

/**
 * Every command's error handling: a LocalpuppetError is one line on stderr (or an
 * `{error}` object with --json) and its own exit code; a flag or argument oclif cannot
 * parse is 64; anything else is a bug: the stack, and 70.
 */
export abstract class BaseCommand extends Command {
  static override enableJsonFlag = true

  /** What --allow-untrusted does in this command, offered with a trust refusal (77) it could override. */
  static allowUntrustedHint = 'or pass --allow-untrusted to use it anyway (with a warning)'

  /** Arguments after a literal `--`, kept away from oclif's parser. */
  protected passThrough: string[] = []

  /** Splits `-- ARGS` off before parsing, so they reach puppet untouched. */
  protected splitPassThrough(): void {
    const index = this.argv.indexOf('--')
    if (index === -1) return
    this.passThrough = this.argv.slice(index + 1)
    this.argv = this.argv.slice(0, index)
  }

  /** Warnings for a person, one line each on stderr (never in the output a program reads). */
  protected warnLines(warnings: string[]): void {
    for (const warning of warnings) process.stderr.write(`localpuppet: warning: ${warning}\n`)
  }

  /** --allow-untrusted: each trust problem it let through, as a warning on stderr. */
  protected warnUntrusted(problems: string[]): void {
    this.warnLines(problems.map((problem) => `--allow-untrusted: ${problem}`))
  }

  protected override async catch(error: Error & {exitCode?: number}): Promise<never> {
    if (error instanceof Errors.ExitError) throw error
    // Anything thrown before parsing finished is oclif's parser refusing the command
    // line (unknown or repeated flag, bad value, extra argument): a usage error, 64.
    const known = this.parsed || error instanceof LocalpuppetError ? toLocalpuppetError(error) : usageError(withFlagGuess(error, this.ctor.flags ?? {}))
    if (known) {
      const refusal = this.withAllowHint(known)
      if (this.jsonEnabled()) {
        this.logJson({error: refusal.toJSON()})
      } else {
        process.stderr.write(`localpuppet: ${refusal.message}\n`)
        for (const hint of refusal.suggestions) process.stderr.write(`  hint: ${hint}\n`)
      }

      return this.exit(refusal.exitCode) as never
    }

    process.stderr.write(`localpuppet: internal error (a bug; please report it with this trace)\n${error.stack ?? error}\n`)
    if (this.jsonEnabled()) this.logJson({error: {code: 'internal', exitCode: ExitCode.internal, message: error.message}})
    return this.exit(ExitCode.internal) as never
  }

  /** The library offers --allow-untrusted in general words: this command's own, or nothing where it has no such flag. */
  private withAllowHint(error: LocalpuppetError): LocalpuppetError {
    if (!error.suggestions.includes(ALLOW_HINT)) return error
    const own = this.ctor.flags?.['allow-untrusted'] ? [(this.ctor as typeof BaseCommand).allowUntrustedHint] : []
    const suggestions = error.suggestions.flatMap((hint) => (hint === ALLOW_HINT ? own : [hint]))
    return Object.assign(new LocalpuppetError(error.code, error.exitCode, error.message, suggestions), {name: error.name})
  }
}

function toLocalpuppetError(error: Error): LocalpuppetError | null {
  if (error instanceof LocalpuppetError) return error
  // A full disk or an I/O error is the machine's fault, not a bug: 74.
  const io = asIoError(error)
  if (io) return io
  // Parser errors that escape parse() still carry oclif.exitCodes' 64 from package.json.
  if ((error as {oclif?: {exit?: number}}).oclif?.exit === ExitCode.usage || 'parse' in error) return usageError(error)
  return null
}

/** `Nonexistent flag: --noopp` gets `(did you mean --noop?)`, among the command's own flags. */
function withFlagGuess(error: Error, flags: Record<string, {char?: string; aliases?: string[]}>): Error {
  const unknown = (error as {flags?: unknown}).flags
  if (!(error instanceof Errors.CLIError) || !Array.isArray(unknown) || !/^Nonexistent flags?:/.test(error.message)) return error
  const names = Object.entries(flags).flatMap(([name, flag]) => [name, ...(flag.aliases ?? [])])
  const described = unknown.map((arg: string) => {
    const guess = arg.startsWith('--') ? closest(arg.slice(2).split('=')[0], names) : undefined
    return guess ? `${arg} (did you mean --${guess}?)` : arg
  })
  return new Error(`Nonexistent flag${unknown.length === 1 ? '' : 's'}: ${described.join(', ')}`)
}

/** oclif's multi-line parser messages as one line: `--timeout: Expected an integer ...`. */
function usageError(error: Error): LocalpuppetError {
  if (error instanceof LocalpuppetError) return error
  const message = error.message
    .replace(/See more help with --help/g, '')
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '')
    .join(': ')
    .replace(/^Parsing (--[\w-]+):/, '$1:')
  return new LocalpuppetError('usage', ExitCode.usage, message, ['see --help'])
}

/** A command description followed by its exit codes, from the one table. */
export function describeWithExitCodes(description: string, rows: ExitCodeRow[]): string {
  return `${description}\n\nEXIT CODES\n${renderExitCodes(rows, '  ')}`
}
