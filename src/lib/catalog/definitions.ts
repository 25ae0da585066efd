import {readFileSync, readdirSync, statSync} from 'node:fs'
import {join, relative} from 'node:path'

import {type PuppetDefinition, scanManifest} from './manifest-scan.js'

/** A definition as Puppet's autoloader sees it. */
export interface LoadableDefinition extends PuppetDefinition {
  /** Null when Puppet can load it by name; otherwise why it cannot (Puppet says "Could not find class"). */
  notLoadable: string | null
  /** The modulepath entry it comes from (absolute), or null for the main manifest. */
  entry: string | null
}

export interface ModuleDefinitions {
  /** Every class and defined type, each module taken from the first modulepath entry that has it (as Puppet does). */
  definitions: LoadableDefinition[]
  /** The manifest files of the modules Puppet loads (absolute), for the syntax check. */
  manifests: string[]
  /** Module name to its absolute directory, for the modules Puppet loads. */
  modules: Map<string, string>
  /** Manifests over `maxManifestBytes` (absolute), not read: neither in `manifests` nor their definitions in `definitions`. */
  oversized: Array<{file: string; bytes: number}>
}

/**
 * validate's bound on one manifest's size: one over it is a problem, and neither read nor
 * given to Puppet. The largest manifest of Debian's 93 Puppet modules is 127 KB (apache's
 * vhost.pp; the next are 50 and 39 KB): 4 MiB is 30 times that. Checking one manifest
 * costs time linear in its size (about 2 s per MB of Puppet's parser here), so the bound
 * keeps one file's check to seconds (issue 33: a generated 8.5 MB manifest in a merge
 * request must not hold every CI run).
 */
export const MANIFEST_BYTES_BOUND = 4 * 1024 * 1024

/** Puppet's rule for a module directory it loads (Puppet::Module.is_module_directory_name?). */
export const MODULE_NAME = /^[a-z][a-z0-9_]*$/

/**
 * Reads the classes and defined types a modulepath provides. As with Puppet's module
 * loading, a module name found in an earlier entry hides the same module in later ones
 * (even one without manifests). Definitions Puppet cannot load by name are kept, marked
 * with the reason: a directory whose name is not a valid module name, or a file where the
 * autoloader does not look. Definitions' `file` is relative to `base` (default: their
 * modulepath entry, `foo/manifests/init.pp`). With `maxManifestBytes`, a manifest larger is
 * not read, only listed in `oversized`.
 */
export function readDefinitions(modulepath: string[], base?: string, maxManifestBytes = Number.POSITIVE_INFINITY): ModuleDefinitions {
  const modules = new Map<string, string>()
  const definitions: LoadableDefinition[] = []
  const manifests: string[] = []
  const oversized: ModuleDefinitions['oversized'] = []
  const seen = new Set<string>()
  for (const entry of modulepath) {
    for (const module of safeReaddir(entry).sort()) {
      const root = join(entry, module)
      if (seen.has(module) || !isDir(root)) continue
      seen.add(module)
      const valid = MODULE_NAME.test(module)
      if (valid) modules.set(module, root)
      for (const file of walkPp(join(root, 'manifests'))) {
        const bytes = fileSize(file)
        if (bytes > maxManifestBytes) {
          if (valid) oversized.push({file, bytes})
          continue
        }

        if (valid) manifests.push(file)
        const inModule = relative(entry, file)
        for (const definition of scanManifest(readFileSync(file, 'utf8'), relative(base ?? entry, file))) {
          definitions.push({...definition, entry, notLoadable: valid ? whyNotLoadable(definition.name, inModule) : `module directory ${module} is not a valid module name (lowercase letters, digits, underscores), so Puppet does not load it`})
        }
      }
    }
  }

  return {definitions, manifests, modules, oversized}
}

/** A file's size, 0 when it cannot be read (reading it then says why). */
export function fileSize(path: string): number {
  try {
    return statSync(path).size
  } catch {
    return 0
  }
}

/**
 * The files Puppet's autoloader reads, in order, when it looks for a class or defined
 * type by name (Puppet::Parser::TypeLoader#files_to_try_for, and Module#match_manifests,
 * which always adds init.pp): `a::b::c` in a/manifests/b/c.pp, a/manifests/b.pp, then
 * a/manifests/init.pp.
 */
export function autoloadFiles(name: string): string[] {
  const [module, ...rest] = name.split('::')
  const files: string[] = []
  for (let i = rest.length; i > 0; i--) files.push(`${module}/manifests/${rest.slice(0, i).join('/')}.pp`)
  files.push(`${module}/manifests/init.pp`)
  return files
}

/** Where Puppet's autoloader looks for a class first: `foo` in foo/manifests/init.pp, `foo::bar::baz` in foo/manifests/bar/baz.pp. */
export function autoloadPath(name: string): string {
  return autoloadFiles(name)[0]
}

/** Null when a definition named `name` in `file` (relative to its modulepath entry) is loadable. */
export function whyNotLoadable(name: string, file: string): string | null {
  const files = autoloadFiles(name)
  if (files.includes(file)) return null
  return `it is in ${file}, where Puppet's autoloader does not look for it (it reads ${files.join(', ')})`
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

/** Whether a directory is there (links followed); false for anything unreadable. */
export function isDir(path: string): boolean {
  try {
    return statSync(path).isDirectory()
  } catch {
    return false
  }
}
