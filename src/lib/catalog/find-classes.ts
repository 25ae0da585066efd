import {readFileSync} from 'node:fs'
import {join} from 'node:path'

import type {ClassCatalog} from './class-catalog.js'
import {type LoadableDefinition, MODULE_NAME, autoloadFiles, autoloadPath, isDir} from './definitions.js'
import {scanManifest} from './manifest-scan.js'
import {closest} from '../util/did-you-mean.js'

/**
 * Why Puppet will not find class `name` on a catalog's modulepath, in `validate`'s words:
 * a defined type is not a class; a class where the autoloader does not look cannot be
 * loaded; else it is not defined (with did-you-mean).
 */
export function unknownClassMessage(catalog: ClassCatalog, name: string): string {
  if (catalog.find('define', name)) return `${name} is a defined type, not a class`
  const misplaced = catalog.definitions.definitions.find((d) => d.kind === 'class' && d.name === name)
  if (misplaced) return `class ${name} cannot be loaded (Puppet: Could not find class ${name}): ${misplaced.notLoadable}`
  const guess = closest(name, catalog.names('class'))
  return `class ${name} is not defined on the modulepath (Puppet looks in ${autoloadPath(name)})${guess ? `; did you mean ${guess}?` : ''}`
}

/**
 * The classes among `names` Puppet will not find on `modulepath` (nor in the main
 * manifest), each with unknownClassMessage. Cheap enough for every plan and apply: only
 * the files the autoloader would read for each name are read; the whole modulepath (and
 * the catalog code, with its YAML reader) only when a class is missing, for the reason
 * and the did-you-mean.
 */
export async function missingClasses(names: string[], modulepath: string[], mainManifest: string | null): Promise<Array<{name: string; message: string}>> {
  let main: LoadableDefinition[] | null = null
  const mainDefinitions = () => (main ??= mainManifest === null ? [] : scanManifest(readText(mainManifest) ?? '', mainManifest).map((d) => ({...d, notLoadable: null, entry: null})))
  const missing = names.map((name) => name.replace(/^::/, '')).filter((name) => !autoloads(name, modulepath) && !mainDefinitions().some((d) => d.kind === 'class' && d.name === name))
  if (missing.length === 0) return []
  const {ClassCatalog} = await import('./class-catalog.js')
  const catalog = new ClassCatalog(modulepath, undefined, mainDefinitions())
  return missing.map((name) => ({name, message: unknownClassMessage(catalog, name)}))
}

/** Whether Puppet's autoloader finds class `name`: in the first modulepath entry that has its module, in one of the files it reads. */
function autoloads(name: string, modulepath: string[]): boolean {
  const module = name.split('::')[0]
  if (!MODULE_NAME.test(module)) return false
  const entry = modulepath.find((dir) => isDir(join(dir, module)))
  if (entry === undefined) return false
  // `class ntp (` as written settles it at once; the scanner (nested classes, comments) only otherwise.
  const written = new RegExp(`(?:^|[\\s;{}])class\\s+(?:::)?${name.replaceAll(':', '\\:')}(?=[\\s({]|inherits)`)
  return autoloadFiles(name).some((file) => {
    const text = readText(join(entry, file))
    return text !== null && (written.test(text) || scanManifest(text, file).some((d) => d.kind === 'class' && d.name === name))
  })
}

function readText(path: string): string | null {
  try {
    return readFileSync(path, 'utf8')
  } catch {
    return null
  }
}
