import {Command, Errors} from '@oclif/core'

import {LocalpuppetError} from '../lib/errors.js'
import {asIoError} from '../lib/util/io-error.js'
import {ExitCode, type ExitCodeRow, renderExitCodes} from '../lib/exit-codes.js'

/**
 * Every command's error handling: a LocalpuppetError is one line on stderr (or an
 * `{error}` object with --json) and its own exit code; a flag or argument oclif cannot
 * parse is 64; anything else is a bug: the stack, and 70.
 */
export abstract class BaseCommand extends Command {
  static override enableJsonFlag = true

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
    const known = this.parsed || error instanceof LocalpuppetError ? toLocalpuppetError(error) : usageError(error)
    if (known) {
      if (this.jsonEnabled()) {
        this.logJson({error: known.toJSON()})
      } else {
        process.stderr.write(`localpuppet: ${known.message}\n`)
        for (const hint of known.suggestions) process.stderr.write(`  hint: ${hint}\n`)
      }

      return this.exit(known.exitCode) as never
    }

    process.stderr.write(`localpuppet: internal error (a bug; please report it with this trace)\n${error.stack ?? error}\n`)
    if (this.jsonEnabled()) this.logJson({error: {code: 'internal', exitCode: ExitCode.internal, message: error.message}})
    return this.exit(ExitCode.internal) as never
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
