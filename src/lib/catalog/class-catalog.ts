import {type LoadableDefinition, type ModuleDefinitions, readDefinitions} from './definitions.js'
import type {PuppetParameter} from './manifest-scan.js'
import {type DataLookup, type ModuleData, readModuleData} from './module-data.js'
import {type AliasResolver, aliasResolver} from './puppet-types.js'

/** Where a parameter's value comes from when the input does not give one. */
export interface ParameterSource {
  /** `module data` (the module's Hiera data, on every node), `code` (the default in the manifest), or `required`. */
  source: 'module data' | 'code' | 'required'
  /** The module data value, with its file and line, when source is `module data`. */
  data: {value: unknown; file: string; line: number | null; level: string} | null
  /** Module data levels that depend on the node (facts) and may give it a value on some nodes. */
  nodeDependent: string[]
}

/**
 * Puppet's metaparameters: every class accepts them (Puppet::Type.eachmetaparam, which
 * Puppet::Resource::Type#create_params_struct adds to each class's parameters).
 */
export const METAPARAMETERS = ['alias', 'audit', 'before', 'loglevel', 'noop', 'notify', 'require', 'schedule', 'stage', 'subscribe', 'tag'] as const

/** The classes and defined types of a modulepath, with module data and type aliases, read lazily. */
export class ClassCatalog {
  readonly definitions: ModuleDefinitions
  readonly aliases: AliasResolver
  private readonly data = new Map<string, ModuleData>()
  private readonly loadable = new Map<string, LoadableDefinition>()

  /** `extra` are definitions Puppet loads before any autoloading: the main manifest's. `maxManifestBytes`: see readDefinitions. */
  constructor(modulepath: string[], base?: string, extra: LoadableDefinition[] = [], maxManifestBytes?: number) {
    this.definitions = readDefinitions(modulepath, base, maxManifestBytes)
    this.definitions.definitions.push(...extra)
    for (const definition of [...extra, ...this.definitions.definitions]) {
      const key = `${definition.kind} ${definition.name}`
      if (definition.notLoadable === null && !this.loadable.has(key)) this.loadable.set(key, definition)
    }

    this.aliases = aliasResolver(this.definitions.modules)
  }

  /** The definition Puppet loads for a name, or undefined. */
  find(kind: 'class' | 'define', name: string): LoadableDefinition | undefined {
    return this.loadable.get(`${kind} ${name}`)
  }

  /** Loadable names of one kind, for did-you-mean. */
  names(kind: 'class' | 'define'): string[] {
    return [...this.loadable.values()].filter((d) => d.kind === kind).map((d) => d.name)
  }

  /** What the class's module data says about `class::parameter`. */
  lookup(className: string, parameter: string): DataLookup {
    const module = className.split('::')[0]
    const dir = this.definitions.modules.get(module)
    if (dir === undefined) return {kind: 'none'}
    if (!this.data.has(module)) this.data.set(module, readModuleData(dir, module))
    return this.data.get(module)!.lookup(`${className}::${parameter}`)
  }

  /** Where a class parameter's value comes from when the input gives none. Defined types have no module data. */
  sourceOf(definition: LoadableDefinition, parameter: PuppetParameter): ParameterSource {
    const found: DataLookup = definition.kind === 'class' ? this.lookup(definition.name, parameter.name) : {kind: 'none'}
    if (found.kind === 'value') {
      const {value, file, line, level} = found.value
      return {source: 'module data', data: {value, file, line, level}, nodeDependent: found.mayOverride}
    }

    return {source: parameter.default === null ? 'required' : 'code', data: null, nodeDependent: found.kind === 'maybe' ? found.levels : []}
  }
}

/** How Puppet names a class as a resource: `Class[Nova::Db::Mysql]`. */
export function classResourceName(name: string): string {
  return `Class[${name
    .split('::')
    .map((part) => part.charAt(0).toUpperCase() + part.slice(1))
    .join('::')}]`
}
