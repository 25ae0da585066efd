import {resolveRelease} from '../release/resolve.js'
import {ClassCatalog, type ParameterSource} from './class-catalog.js'
import type {PuppetDefinition, PuppetParameter} from './manifest-scan.js'

export interface ReleaseClasses {
  release: string
  modulepath: string[]
  /**
   * Sorted by name; `file` is relative to `release`. Definitions Puppet cannot load by
   * name (a misplaced file, an invalid module directory name) are listed with the reason.
   */
  definitions: Array<PuppetDefinition & {release: string; notLoadable: string | null; parameters: Array<PuppetParameter & ParameterSource>}>
}

/** The classes and defined types a release's resolved modulepath provides, and where each parameter's default comes from. */
export async function releaseClasses(moduleDir: string, ref: string): Promise<ReleaseClasses> {
  const resolution = await resolveRelease(moduleDir, ref, {allowMutable: true})
  const catalog = new ClassCatalog(resolution.modulepath.map((entry) => entry.path))
  const releaseOf = new Map(resolution.modulepath.map((entry) => [entry.path, entry.release]))
  const definitions: ReleaseClasses['definitions'] = catalog.definitions.definitions.map(({entry, ...definition}) => ({
    ...definition,
    release: releaseOf.get(entry ?? '') ?? '',
    parameters: definition.parameters.map((parameter) => ({...parameter, ...catalog.sourceOf({...definition, entry}, parameter)})),
  }))
  definitions.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
  return {release: resolution.modulepath[0].release, modulepath: resolution.modulepath.map((entry) => entry.path), definitions}
}
