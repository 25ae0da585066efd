import {Command, Errors} from '@oclif/core'

import {LocalpuppetError} from '../lib/errors.js'
import {closest} from '../lib/util/did-you-mean.js'
import {asIoError} from '../lib/util/io-error.js'
import {ALLOW_HINT} from '../lib/util/trusted-path.js'
import {ExitCode, type ExitCodeRow, renderExitCodes} from '../lib/exit-codes.js'
import {redactUrls, shownMessage} from './render/message-text.js'

/** A command's 77 row, in the one wording. */
export {untrustedExit} from '../lib/exit-codes.js'

/**
 * Every command's error handling: a LocalpuppetError is one line on stderr, made safe by
 * shownMessage whatever built it (or an `{error}` object with --json, exact but for URLs'
 * credentials) and its own exit code; a flag or argument oclif cannot
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

  /** A line for a person on stderr, `localpuppet: LINE`, made safe as every message is. */
  protected note(line: string): void {
    process.stderr.write(`localpuppet: ${shownMessage(line)}\n`)
  }

  /** Warnings for a person, one line each on stderr (never in the output a program reads). */
  protected warnLines(warnings: string[]): void {
    for (const warning of warnings) process.stderr.write(`localpuppet: warning: ${shownMessage(warning)}\n`)
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
        const json = refusal.toJSON()
        this.logJson({error: {...json, message: redactUrls(json.message), ...(json.suggestions ? {suggestions: json.suggestions.map(redactUrls)} : {})}})
      } else {
        process.stderr.write(renderRefusal(refusal))
      }

      return this.exit(refusal.exitCode) as never
    }

    // The trace's lines as they are, each made safe (a message may quote what a server said).
    const trace = String(error.stack ?? error).split('\n').map(shownMessage).join('\n')
    process.stderr.write(`localpuppet: internal error (a bug; please report it with this trace)\n${trace}\n`)
    if (this.jsonEnabled()) this.logJson({error: {code: 'internal', exitCode: ExitCode.internal, message: redactUrls(error.message)}})
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

/** A refusal as a person reads it on stderr: `localpuppet: MESSAGE`, then one `  hint:` line each. */
export function renderRefusal(error: Pick<LocalpuppetError, 'message' | 'suggestions'>): string {
  return [`localpuppet: ${shownMessage(error.message)}\n`, ...error.suggestions.map((hint) => `  hint: ${shownMessage(hint)}\n`)].join('')
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
  const lines = error.message
    // oclif dims some of its reasons (colour codes on a terminal).
    .replace(/\u001B\[[\d;]*m/g, '')
    .replace(/See more help with --help/g, '')
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '')
  const relations = flagRelations(lines)
  if (relations) return new LocalpuppetError('usage', ExitCode.usage, relations)
  const message = lines
    .map((line, i) => (i < lines.length - 1 ? line.replace(/:$/, '') : line))
    .join(': ')
    .replace(/^Parsing (--[\w-]+):/, '$1:')
  return new LocalpuppetError('usage', ExitCode.usage, message, ['see --help'])
}

/**
 * oclif's refusal of flags given without the flags they need (dependsOn), with flags they
 * exclude (exclusive), or without required ones (`The following error occurred:` and one
 * reason a line), said as one line: `--for needs --require-healthy`, `--inputs and --node
 * cannot be used together`. Null for any other message, or a reason not recognised.
 */
function flagRelations(lines: string[]): string | null {
  if (lines.length < 2 || !/^The following errors? occurred:$/.test(lines[0])) return null
  const needing = new Map<string, string[]>()
  const required: string[] = []
  const said: string[] = []
  const pairs = new Set<string>()
  for (const reason of lines.slice(1)) {
    let match: RegExpExecArray | null
    if ((match = /^All of the following must be provided when using (--[\w-]+): (.+)$/.exec(reason))) {
      const needs = and(match[2].split(', '))
      needing.set(needs, [...(needing.get(needs) ?? []), match[1]])
    } else if ((match = /^One of the following must be provided when using (--[\w-]+): (.+)$/.exec(reason))) {
      said.push(`${match[1]} needs ${or(match[2].split(', '))}`)
    } else if ((match = /^(--[\w-]+)(?:=.*)? cannot also be provided when using (--[\w-]+)$/.exec(reason))) {
      const pair = [match[2], match[1]].sort().join(' and ')
      if (!pairs.has(pair)) said.push(`${pair} cannot be used together`)
      pairs.add(pair)
    } else if ((match = /^Only the following can be provided when using (--[\w-]+): (.+)$/.exec(reason))) {
      said.push(`${match[1]} can only be used with ${or(match[2].split(', ').filter((flag) => flag !== match![1]))}`)
    } else if ((match = /^(Exactly one|At least one) of the following must be provided: (.+)$/.exec(reason))) {
      said.push(`${match[1] === 'Exactly one' ? 'exactly one' : 'at least one'} of ${match[2]} is needed`)
    } else if ((match = /^Missing required flag ([\w-]+)$/.exec(reason))) {
      required.push(`--${match[1]}`)
    } else {
      return null
    }
  }

  const needs = [...needing].map(([flags, given]) => `${and(given)} ${given.length === 1 ? 'needs' : 'need'} ${flags}`)
  const missing = required.length === 0 ? [] : [`${and(required)} ${required.length === 1 ? 'is' : 'are'} required`]
  return [...missing, ...needs, ...said].join('; ')
}

/** `--a`, `--a and --b`, `--a, --b and --c`. */
function and(items: string[]): string {
  return items.length < 2 ? items.join('') : `${items.slice(0, -1).join(', ')} and ${items.at(-1)}`
}

/** `--a`, `--a or --b`, `--a, --b or --c`. */
function or(items: string[]): string {
  return items.length < 2 ? items.join('') : `${items.slice(0, -1).join(', ')} or ${items.at(-1)}`
}

/** A command description followed by its exit codes, from the one table. */
export function describeWithExitCodes(description: string, rows: ExitCodeRow[]): string {
  return `${description}\n\nEXIT CODES\n${renderExitCodes(rows, '  ')}`
}
