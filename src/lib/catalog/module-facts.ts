import {readFile, readdir} from 'node:fs/promises'
import {join, relative} from 'node:path'

import {parseYaml} from '../yaml.js'

/** The facts a release's modules add to every node, as far as their files tell. */
export interface ModuleFacts {
  /** Names of custom facts (`Facter.add(:name)`) and external facts (facts.d/*.yaml|json|txt). */
  names: Set<string>
  /** Name prefixes of facts named at run time: `Facter.add("driver_#{x}")` gives `driver_`. */
  prefixes: string[]
  /** A file whose fact names cannot be known without running it (an executable external fact, `Facter.add(name)`), or null. */
  unknowable: string | null
}

/**
 * The facts the modules of one release (a directory of modules) define: custom facts in
 * each module's `lib/facter` (and the older `plugins/facter`), which Puppet hands Facter
 * for every run, and external facts in its `facts.d`. Names are read, never run: a
 * `Facter.add` whose name is not a literal, or an external fact that is a program, makes
 * the release's fact names unknowable (`unknowable` names the file).
 */
export async function moduleFacts(releasePath: string): Promise<ModuleFacts> {
  const found: ModuleFacts = {names: new Set(), prefixes: [], unknowable: null}
  const modules = await readdir(releasePath, {withFileTypes: true}).catch(() => [])
  for (const module of modules.filter((entry) => entry.isDirectory()).map((entry) => join(releasePath, entry.name))) {
    for (const dir of [join(module, 'lib', 'facter'), join(module, 'plugins', 'facter')]) {
      for (const file of await filesUnder(dir)) if (file.endsWith('.rb')) customFacts(await readFile(file, 'utf8').catch(() => ''), file, found, releasePath)
    }

    for (const file of await filesUnder(join(module, 'facts.d'))) await externalFacts(file, found, releasePath)
  }

  return found
}

/** `Facter.add(:name)`, `Facter.add('name')`, `Facter.add("prefix_#{x}")`; anything else as the name makes the names unknowable. */
function customFacts(text: string, file: string, found: ModuleFacts, root: string): void {
  for (const match of text.matchAll(/(?:\bFacter|\[:facter\])\.add\(\s*(?::(\w+)|'([^']*)'|"([^"]*)"|([^\s)]))/g)) {
    const [, symbol, single, double] = match
    const name = symbol ?? single ?? (double !== undefined && !double.includes('#{') ? double : undefined)
    if (name !== undefined) found.names.add(name.toLowerCase())
    else if (double !== undefined && double.indexOf('#{') > 0) found.prefixes.push(double.slice(0, double.indexOf('#{')).toLowerCase())
    else found.unknowable ??= relative(root, file)
  }
}

/** Facter's external facts: keys of a YAML or JSON mapping, `key=value` lines of a .txt; any other file is a program whose output is unknown. */
async function externalFacts(file: string, found: ModuleFacts, root: string): Promise<void> {
  const text = await readFile(file, 'utf8').catch(() => null)
  if (text === null) return
  if (/\.txt$/.test(file)) {
    for (const line of text.split('\n')) {
      const key = /^\s*([^=#\s][^=]*?)\s*=/.exec(line)?.[1]
      if (key) found.names.add(key.toLowerCase())
    }

    return
  }

  if (/\.(ya?ml|json)$/.test(file)) {
    try {
      const doc = parseYaml(text, file)
      if (doc !== null && typeof doc === 'object' && !Array.isArray(doc)) {
        for (const key of Object.keys(doc)) found.names.add(key.toLowerCase())
        return
      }
    } catch {
      // Not YAML or JSON we can read: its fact names are unknowable, said below.
    }
  }

  found.unknowable ??= relative(root, file)
}

async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, {withFileTypes: true, recursive: true}).catch(() => [])
  return entries.filter((entry) => entry.isFile()).map((entry) => join(entry.parentPath, entry.name)).sort()
}
