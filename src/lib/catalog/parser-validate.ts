import {readFileSync} from 'node:fs'

import {PUPPET_PRELUDE, runPuppetRuby} from './puppet-ruby.js'

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
 * error raised.
 */
export const SYNTAX_CHECK = String.raw`
(request['syntax'] || []).each do |file|
  logs.clear
  errors = []
  begin
    env = Puppet::Node::Environment.create(:production, [], file)
    Puppet.override({:current_environment => env, :loaders => Puppet::Pops::Loaders.new(env)}, 'localpuppet validate') do
      env.check_for_reparse
      env.known_resource_types.clear
    end
  rescue Puppet::ParseError => e
    errors << {'message' => e.basic_message, 'file' => e.file, 'line' => e.line, 'column' => e.pos}
  end
  logged = logs.select { |l| l.level == :err }.map { |l| {'message' => l.message, 'file' => l.file, 'line' => l.line, 'column' => l.pos} }
  out.puts(JSON.generate({'syntax' => file, 'errors' => logged.empty? ? errors : logged}))
end
logs.clear
`

/**
 * Checks the syntax of every file, each on its own, in one Ruby process that loads Puppet
 * once (Puppet takes seconds to start, so never once per file), and returns each error
 * with its file, line and column. Puppet reports "end of input" without a line: the
 * file's last line is given then.
 */
export async function validateManifests(puppet: string, files: string[], puppetArgs: string[] = []): Promise<SyntaxProblem[]> {
  if (files.length === 0) return []
  const {answers, ended} = await runPuppetRuby(puppet, PUPPET_PRELUDE + SYNTAX_CHECK, {puppet_args: puppetArgs, syntax: files})
  return syntaxProblems(files, answers, ended)
}

/** The syntax problems among a Puppet program's answers; a file it never answered for is one too. */
export function syntaxProblems(files: string[], answers: Array<Record<string, unknown>>, ended: string): SyntaxProblem[] {
  const byFile = new Map<string, Array<{message: string; file: string | null; line: number | null; column: number | null}>>()
  for (const answer of answers) if (typeof answer.syntax === 'string') byFile.set(answer.syntax, answer.errors as never)
  const problems: SyntaxProblem[] = []
  for (const file of files) {
    const errors = byFile.get(file)
    if (errors === undefined) {
      problems.push({file, line: null, column: null, message: `Puppet stopped before checking this file (${ended})`})
      continue
    }

    for (const error of errors) problems.push({file, line: error.line ?? lastLine(file), column: error.column ?? null, message: error.message})
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
