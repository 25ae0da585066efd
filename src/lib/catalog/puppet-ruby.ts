import {basename} from 'node:path'

import {PuppetUnavailableError} from '../errors.js'
import {startChild} from '../util/child.js'
import {findExecutable, scriptInterpreter} from '../util/find-executable.js'
import {assertTrustedPath} from '../util/trusted-path.js'

/**
 * The start of every program run by `runPuppetRuby`: loads Puppet once, reads the request
 * (JSON on stdin) into `request`, keeps the real stdout as `out` for one JSON line per
 * answer (whatever Puppet or a module prints goes to stderr), initialises Puppet's
 * settings from `request['puppet_args']` without creating their directories, and
 * collects Puppet's log messages in `logs` instead of printing them.
 *
 * It also makes two of Puppet's own steps linear, with the same answers (issue 33; Puppet
 * 7.23 and 8 alike): Locator19 (the locator of every manifest) counts a column's
 * characters from the start of its line on each call, and Puppet asks for the column of
 * every class, define and parameter as it loads a file, so many classes on one long line
 * (generated code) took time quadratic in that line (20,000 classes on one line of 1.3 MB:
 * 9 s of CPU to load, 40,000 on 2.7 MB: 39 s); here each locator remembers the last
 * column it counted and counts on from there when asked further along the same line
 * (Puppet asks in order of the text). And the lexer, to tell `[` after a blank (a list)
 * from `[` after a name (an access), copies the whole text before each one: a manifest of
 * 20,000 `File['x']` references took 8 s to lex, 80,000 over two minutes; here it looks
 * at the last character only.
 */
export const PUPPET_PRELUDE = String.raw`
require 'json'
require 'puppet'
module LocalpuppetColumns
  def offset_on_line(offset)
    line_offset = line_index[line_for_offset(offset) - 1]
    last = @localpuppet_column
    chars = if last && last[0] == line_offset && last[1] <= offset
      last[2] + @string.byteslice(last[1], offset - last[1]).length
    else
      @string.byteslice(line_offset, offset - line_offset).length
    end
    @localpuppet_column = [line_offset, offset, chars]
    chars
  end
end
locator19 = defined?(Puppet::Pops::Parser::Locator::Locator19) && Puppet::Pops::Parser::Locator::Locator19
locator19.prepend(LocalpuppetColumns) if locator19 && locator19.method_defined?(:offset_on_line) && !(locator19 < LocalpuppetColumns)
module LocalpuppetBracket
  def initialize(*args)
    super
    lexer = Puppet::Pops::Parser::Lexer2
    return unless @selector.is_a?(Hash) && @selector['['] && lexer.const_defined?(:TOKEN_LISTSTART) && lexer.const_defined?(:TOKEN_LBRACK)
    # As Puppet's rule, from the last character before the [ (at most 4 bytes back) instead of the whole text before it.
    frozen = @selector.frozen?
    @selector = @selector.dup
    @selector['['] = lambda do
      before = @scanner.pos
      from = before < 4 ? 0 : before - 4
      if before == 0 || @scanner.string.byteslice(from, before - from)[-1] =~ /[[:blank:]\r\n]+/
        emit(lexer::TOKEN_LISTSTART, before)
      else
        emit(lexer::TOKEN_LBRACK, before)
      end
    end
    @selector.freeze if frozen
  end
end
lexer2 = defined?(Puppet::Pops::Parser::Lexer2) && Puppet::Pops::Parser::Lexer2
lexer2.prepend(LocalpuppetBracket) if lexer2 && !(lexer2 < LocalpuppetBracket)
module Puppet; module Test; class LogCollector
  def initialize(logs); @logs = logs; end
  def <<(message); @logs << message; end
end; end; end unless defined?(Puppet::Test::LogCollector)

request = JSON.parse(STDIN.read)
out = STDOUT.dup
out.sync = true
$stdout = STDERR
Puppet.initialize_settings(request['puppet_args'])
logs = []
Puppet::Util::Log.close_all
Puppet::Util::Log.newdestination(Puppet::Test::LogCollector.new(logs))
Puppet::Util::Log.level = :warning
`

/**
 * After PUPPET_PRELUDE: one answer naming the Puppet library this process loaded, its
 * version and the real path of its puppet/version.rb (which says whose it is: a package's
 * file or a gem's directory), for when the puppet executable alone does not tell.
 */
export const PUPPET_LIBRARY = String.raw`
library = $LOADED_FEATURES.find { |f| f.end_with?('/puppet/version.rb') }
out.puts(JSON.generate({'library' => {'version' => Puppet.version.to_s, 'file' => library && File.realpath(library)}}))
`

export interface PuppetRubyRun {
  /** Every line of stdout that is a JSON object, parsed, in order. */
  answers: Array<Record<string, unknown>>
  /** How the process ended, for a message: `exit 1`, `SIGKILL`, or that it was stopped for want of an answer. */
  ended: string
  /** Whether it was stopped because no answer came within `stepTimeoutMs`: the step after the last answer did not finish. */
  timedOut: boolean
}

/** The most of Puppet's stderr kept, for the line that says why it could not load. */
const STDERR_BYTES = 64 * 1024

/**
 * Runs a Ruby program (PUPPET_PRELUDE and what follows it) with the interpreter of
 * `puppet`'s own #! line, so that it is that Puppet's library, loaded once however much
 * the program does with it (Puppet takes seconds to start). Run as root, that Ruby is code
 * root runs as much as puppet itself: it must pass the trust rules (77). With
 * `stepTimeoutMs`, the process (and what it started) is killed when that long passes
 * without a new answer line: each step the program answers for is bounded, not the whole
 * run, which grows with the work asked. Throws PuppetUnavailableError (69) when the
 * interpreter cannot be started or no answer came.
 */
export async function runPuppetRuby(puppet: string, program: string, request: Record<string, unknown>, options: {stepTimeoutMs?: number} = {}): Promise<PuppetRubyRun> {
  const [interpreter, ...rubyArgs] = interpreterOf(puppet)
  // Started by the path judged, not looked up again.
  const ruby = findExecutable(interpreter)
  if (ruby === null) throw new PuppetUnavailableError(`could not find ${interpreter} (the interpreter of ${puppet}) on PATH`)
  if ((process.geteuid?.() ?? 0) === 0) assertTrustedPath(ruby, {what: `interpreter of ${puppet}`, content: true, overridable: false})
  // Decoded once at the end: a chunk may end inside a character.
  const stdout: Buffer[] = []
  let stderr = ''
  let timedOut = false
  let timer: NodeJS.Timeout | undefined
  const step = options.stepTimeoutMs
  const arm = () => {
    if (step === undefined) return
    clearTimeout(timer)
    timer = setTimeout(() => {
      timedOut = true
      child.killTree('SIGKILL')
    }, step)
  }

  const child = startChild(ruby, [...rubyArgs, '-e', program], {
    input: JSON.stringify(request),
    onStdout(chunk) {
      stdout.push(chunk)
      if (chunk.includes(10)) arm()
    },
    onStderr(chunk) {
      if (stderr.length < STDERR_BYTES) stderr += chunk.toString('utf8', 0, Math.min(chunk.length, STDERR_BYTES))
    },
  })
  arm()
  const exit = await child.exited.finally(() => clearTimeout(timer))
  if (exit.spawnError) throw new PuppetUnavailableError(`could not start ${ruby} (the interpreter of ${puppet}): ${exit.spawnError.message}`)
  const answers: Array<Record<string, unknown>> = []
  for (const line of Buffer.concat(stdout).toString('utf8').split('\n')) {
    if (!line.startsWith('{')) continue
    try {
      answers.push(JSON.parse(line) as Record<string, unknown>)
    } catch {
      // A line that only looks like JSON (Ruby's own warnings): not one of our answers.
    }
  }

  const ended = timedOut ? `stopped: no answer in ${step! / 1000} s, validate's bound on one step` : exit.exitCode === null ? String(exit.signal) : `exit ${exit.exitCode}`
  if (answers.length === 0) {
    const why = (timedOut ? undefined : stderr.split('\n').find((l) => /Error|error/.test(l))) ?? ended
    throw new PuppetUnavailableError(`could not load Puppet with ${ruby} (the interpreter of ${puppet}): ${why.trim()}`)
  }

  return {answers, ended, timedOut}
}

/** The command line that runs a Ruby script the way `puppet`'s own #! line runs it (else the ruby on PATH). */
function interpreterOf(puppet: string): string[] {
  const found = scriptInterpreter(puppet)
  return found?.path && /ruby/.test(basename(found.path)) ? [found.path, ...found.args] : ['ruby']
}

/**
 * Whether `puppet` is a Ruby script (Debian's, a gem's), so that runPuppetRuby loads the
 * very library it runs; a shell wrapper's Puppet is only a guess of the ruby on PATH.
 */
export function runsAsRuby(puppet: string): boolean {
  const found = scriptInterpreter(puppet)
  return Boolean(found?.path && /ruby/.test(basename(found.path)))
}
