import {readFileSync} from 'node:fs'

import {PuppetUnavailableError} from '../errors.js'
import {startChild} from '../util/child.js'

export interface SyntaxProblem {
  file: string
  line: number | null
  column: number | null
  message: string
}

/**
 * Runs `puppet parser validate` once over every file (Puppet takes seconds to start, so
 * never once per file) and returns each error with its file, line and column. Puppet
 * reports "end of input" without a line: the file's last line is given then.
 */
export async function validateManifests(puppet: string, files: string[], puppetArgs: string[] = []): Promise<SyntaxProblem[]> {
  if (files.length === 0) return []
  let output = ''
  const child = startChild(puppet, ['parser', 'validate', '--color', 'false', ...puppetArgs, ...files], {
    onStdout: (chunk) => (output += chunk),
    onStderr: (chunk) => (output += chunk),
  })
  const exit = await child.exited
  if (exit.spawnError) throw new PuppetUnavailableError(`could not start ${puppet}: ${exit.spawnError.message}`)
  const problems: SyntaxProblem[] = []
  for (const line of output.split('\n')) {
    const match = /^Error: (?:Could not parse for environment [^:]+: )?(.*?)\s*\(file: (.+?)(?:, line: (\d+))?(?:, column: (\d+))?\)\s*$/.exec(line.trim())
    if (!match) continue
    const [, message, file, lineNo, column] = match
    problems.push({file, line: lineNo ? Number(lineNo) : lastLine(file), column: column ? Number(column) : null, message})
  }

  if (exit.exitCode !== 0 && problems.length === 0) {
    const first = output.split('\n').find((line) => line.startsWith('Error:')) ?? `exit ${exit.exitCode}`
    throw new PuppetUnavailableError(`puppet parser validate failed: ${first.replace(/^Error: /, '')}`)
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
