import {resolveRelease} from '../release/resolve.js'
import {readDefinitions} from './definitions.js'
import type {PuppetDefinition} from './manifest-scan.js'

export interface ReleaseClasses {
  release: string
  modulepath: string[]
  /** Sorted by name; `file` is relative to `release`. */
  definitions: Array<PuppetDefinition & {release: string}>
}

/** The classes and defined types a release's resolved modulepath provides. */
export async function releaseClasses(moduleDir: string, ref: string): Promise<ReleaseClasses> {
  const resolution = await resolveRelease(moduleDir, ref, {allowMutable: true})
  const definitions: ReleaseClasses['definitions'] = []
  for (const entry of resolution.modulepath) {
    // One entry at a time so each definition says which release it comes from; a module
    // an earlier entry already provides is hidden, as Puppet hides it.
    const shadowed = new Set(definitions.map((d) => d.file.split('/')[0]))
    for (const definition of readDefinitions([entry.path]).definitions) {
      if (!shadowed.has(definition.file.split('/')[0])) definitions.push({...definition, release: entry.release})
    }
  }

  definitions.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
  return {release: resolution.modulepath[0].release, modulepath: resolution.modulepath.map((entry) => entry.path), definitions}
}
