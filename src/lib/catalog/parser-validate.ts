import {readFileSync} from 'node:fs'

export interface SyntaxProblem {
  file: string
  line: number | null
  column: number | null
  message: string
}

/**
 * After PUPPET_PRELUDE: checks each file of `request['syntax']` as `puppet parser validate`
 * does (parse, then Puppet's language validation), but each in an environment of its own.
 * One environment for all makes Puppet refuse the second definition of a name ("Attempt
 * to redefine entity"), which two releases of one app on one run always have. One JSON
 * line per file: its errors as logged (several, when validation finds several), else the
 * error raised. With VARIABLE_SCOPES before it, a file of `request['scopes']` that has no
 * errors also gets its `scopes`, from the program Puppet parsed for the check (parsing it
 * again would cost about half as much as the check).
 */
export const SYNTAX_CHECK = String.raw`
(request['syntax'] || []).each do |file|
  logs.clear
  errors = []
  scopes = nil
  begin
    env = Puppet::Node::Environment.create(:production, [], file)
    Puppet.override({:current_environment => env, :loaders => Puppet::Pops::Loaders.new(env)}, 'localpuppet validate') do
      env.check_for_reparse
      main = env.known_resource_types.hostclass('')
      if defined?(variable_scope_files) && variable_scope_files[file] && main && main.code.respond_to?(:program_model)
        begin
          scopes = LocalpuppetVariableScopes.scan(main.code.program_model)
        rescue SystemStackError, StandardError
          # Parsed, but too deep for the walker: its variables are not judged (the file is not at fault).
          scopes = nil
        end
      end
      env.known_resource_types.clear
    end
  rescue Puppet::ParseError => e
    errors << {'message' => e.basic_message.to_s.scrub, 'file' => e.file, 'line' => e.line, 'column' => e.pos}
  rescue SystemStackError
    errors << {'message' => 'Could not parse: nested too deeply for Puppet\'s parser (stack level too deep)'}
  rescue StandardError => e
    # Puppet::Error for bytes that are not UTF-8, and whatever else Puppet raises on one file: that file's problem, and the next file is still checked.
    errors << {'message' => e.message.to_s.scrub}
  end
  logged = logs.select { |l| l.level == :err }.map { |l| {'message' => l.message, 'file' => l.file, 'line' => l.line, 'column' => l.pos} }
  answer = {'syntax' => file, 'errors' => logged.empty? ? errors : logged}
  answer['scopes'] = scopes if scopes && answer['errors'].empty?
  out.puts(JSON.generate(answer))
end
logs.clear
`

/**
 * The syntax problems among a Puppet program's answers; a file it never answered for is
 * one too. Puppet reports "end of input" without a line: the file's last line is given then.
 * When the program was stopped for taking too long on one step (`stopped.timedOut`), the
 * first file without an answer is the one it was checking: that file is named as too slow.
 */
export function syntaxProblems(files: string[], answers: Array<Record<string, unknown>>, stopped: {ended: string; timedOut: boolean}): SyntaxProblem[] {
  const byFile = new Map<string, Array<{message: string; file: string | null; line: number | null; column: number | null}>>()
  for (const answer of answers) if (typeof answer.syntax === 'string') byFile.set(answer.syntax, answer.errors as never)
  const problems: SyntaxProblem[] = []
  let stuck = stopped.timedOut
  for (const file of files) {
    const errors = byFile.get(file)
    if (errors === undefined) {
      problems.push({file, line: null, column: null, message: stuck ? `Puppet did not finish checking this file (${stopped.ended})` : `Puppet stopped before checking this file (${stopped.ended})`})
      stuck = false
      continue
    }

    // Read once for the file, not once per error without a line.
    let last: number | null | undefined
    const fileEnd = () => (last === undefined ? (last = lastLine(file)) : last)
    for (const error of errors) problems.push({file, line: error.line ?? fileEnd(), column: error.column ?? null, message: error.message})
  }

  return problems
}

function lastLine(file: string): number | null {
  try {
    return readFileSync(file, 'utf8').trimEnd().split('\n').length
  } catch {
    return null
  }
}
