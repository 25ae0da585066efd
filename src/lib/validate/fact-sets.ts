import {readFileSync, statSync} from 'node:fs'
import {basename, join} from 'node:path'

import {InputError, IoError, describeFsError} from '../errors.js'
import {isMapping} from '../util/json.js'
import {parseYaml} from '../yaml.js'

export type Facts = Record<string, unknown>

/**
 * The fact set for each input, from `--facts FILE|DIR`: a file is one fact set for every
 * input; a directory holds one per input name (`web01.yaml` takes `web01.json`,
 * `web01.yaml` or `web01.yml`), as onceover and rspec-puppet-facts keep them. A fact set is
 * a mapping of facts (Facter's or facterdb's JSON), or `puppet facts` output (`name` and
 * `values`, YAML with its Ruby tag, or JSON). An input without one gets an InputError
 * naming what was looked for. A path that does not exist throws (66).
 */
export function factSets(path: string, inputs: string[]): Map<string, Facts | InputError> {
  let directory: boolean
  try {
    directory = statSync(path).isDirectory()
  } catch (error) {
    throw describeFsError(error, `--facts ${path}`)
  }

  const sets = new Map<string, Facts | InputError>()
  if (!directory) {
    const facts = readFactSet(path)
    for (const input of inputs) sets.set(input, facts)
    return sets
  }

  for (const input of inputs) {
    const name = basename(input).replace(/\.ya?ml$/, '')
    const candidates = ['json', 'yaml', 'yml'].map((ext) => join(path, `${name}.${ext}`))
    const found = candidates.find((file) => {
      try {
        return statSync(file).isFile()
      } catch {
        return false
      }
    })
    sets.set(input, found ? readFactSet(found) : new InputError(`no fact set for ${name} in ${path} (${candidates.map((c) => basename(c)).join(', ')})`))
  }

  return sets
}

function readFactSet(file: string): Facts | InputError {
  let text: string
  try {
    text = readFileSync(file, 'utf8')
  } catch (error) {
    const described = describeFsError(error, `fact set ${file}`)
    // A disk that fails is 74 (thrown), not a fact set at fault.
    if (described instanceof IoError) throw described
    return new InputError(described.message)
  }

  let data: unknown
  try {
    // `puppet facts --render-as yaml` tags its document !ruby/object:Puppet::Node::Facts.
    data = file.endsWith('.json') ? JSON.parse(text) : parseYaml(text.replaceAll(/!ruby\/\S+/g, ''), file)
  } catch (error) {
    return error instanceof InputError ? error : new InputError(`${file}: ${(error as Error).message}`)
  }

  if (isMapping(data) && isMapping(data.values) && typeof data.name === 'string') data = data.values
  if (!isMapping(data)) return new InputError(`${file}: a fact set must be a mapping of fact names to values`)
  return data
}
