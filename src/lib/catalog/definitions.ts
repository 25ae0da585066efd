import {readFileSync, readdirSync, statSync} from 'node:fs'
import {join, relative} from 'node:path'

import {type PuppetDefinition, scanManifest} from './manifest-scan.js'

export interface ModuleDefinitions {
  /** Every class and defined type, each module taken from the first modulepath entry that has it (as Puppet does). */
  definitions: PuppetDefinition[]
  /** The manifest files those come from (absolute), for `puppet parser validate`. */
  manifests: string[]
}

/**
 * Reads the classes and defined types a modulepath provides. As with Puppet's module
 * loading, a module name found in an earlier entry hides the same module in later ones.
 * Definitions' `file` is relative to `base` (default: their modulepath entry, `foo/manifests/init.pp`).
 */
export function readDefinitions(modulepath: string[], base?: string): ModuleDefinitions {
  const seen = new Set<string>()
  const definitions: PuppetDefinition[] = []
  const manifests: string[] = []
  for (const entry of modulepath) {
    for (const module of safeReaddir(entry).sort()) {
      if (seen.has(module) || !/^[a-z][a-z0-9_]*$/.test(module)) continue
      const dir = join(entry, module, 'manifests')
      if (!isDir(dir)) continue
      seen.add(module)
      for (const file of walkPp(dir)) {
        manifests.push(file)
        definitions.push(...scanManifest(readFileSync(file, 'utf8'), relative(base ?? entry, file)))
      }
    }
  }

  return {definitions, manifests}
}

/** Where Puppet's autoloader looks for a class: `foo` in foo/manifests/init.pp, `foo::bar::baz` in foo/manifests/bar/baz.pp. */
export function autoloadPath(name: string): string {
  const [module, ...rest] = name.split('::')
  return rest.length === 0 ? `${module}/manifests/init.pp` : `${module}/manifests/${rest.join('/')}.pp`
}

function walkPp(dir: string): string[] {
  const files: string[] = []
  for (const name of safeReaddir(dir).sort()) {
    const path = join(dir, name)
    if (isDir(path)) files.push(...walkPp(path))
    else if (name.endsWith('.pp')) files.push(path)
  }

  return files
}

function safeReaddir(dir: string): string[] {
  try {
    return readdirSync(dir)
  } catch {
    return []
  }
}

function isDir(path: string): boolean {
  try {
    return statSync(path).isDirectory()
  } catch {
    return false
  }
}
