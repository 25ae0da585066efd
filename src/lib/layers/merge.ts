import {InputError} from '../errors.js'
import {isMapping} from '../util/json.js'
import {Secret} from '../util/secret.js'
import {type Layer, type Origin, type Placed, at} from './layer-file.js'

/** The classes, parameters and environment a node's layers add up to, as Puppet's ENC receives them. */
export interface MergedDocument {
  classes?: Record<string, Record<string, unknown>>
  parameters?: Record<string, unknown>
  environment?: string
}

/** Where every value of a merged document came from. */
export interface Origins {
  classes: Record<string, {origin: Origin; parameters: Record<string, Origin>}>
  parameters: Record<string, Origin>
  environment?: Origin
}

/** One merged layer: its name, file and digest, in the order merged. */
export interface LayerDigest {
  name: string
  file: string
  digest: string
}

export interface Merged {
  document: MergedDocument
  origins: Origins
  layers: LayerDigest[]
}

/**
 * Merges layers in order (the release's, the node's named layers, the node's own input):
 * classes are a union, a class's parameters merge key by key, top-level parameters and
 * the environment likewise, a later layer winning. Each layer's `remove` entries apply
 * before what that layer sets, so a layer can drop a class or key an earlier one set (and
 * set it anew). A value whose kind (mapping, list, scalar; nothing goes with any) differs
 * from the one an earlier layer set is refused (65) naming both places, unless removed
 * first. Pure: the result depends on the layers and their order only.
 */
export function mergeLayers(layers: readonly Layer[]): Merged {
  const classes = new Map<string, {origin: Origin; parameters: Map<string, Placed>}>()
  const parameters = new Map<string, Placed>()
  let environment: Placed<string> | undefined
  for (const layer of layers) {
    for (const removal of layer.removals) {
      if (removal.kind === 'class') classes.delete(removal.name)
      else if (removal.kind === 'class-parameter') classes.get(removal.name)?.parameters.delete(removal.parameter)
      else if (removal.kind === 'parameter') parameters.delete(removal.name)
      else environment = undefined
    }

    for (const [name, cls] of layer.classes) {
      let merged = classes.get(name)
      if (!merged) {
        merged = {origin: cls.origin, parameters: new Map()}
        classes.set(name, merged)
      }

      for (const [param, placed] of cls.parameters) setChecked(merged.parameters, param, placed, `classes.${name}.${param}`)
    }

    for (const [name, placed] of layer.parameters) setChecked(parameters, name, placed, `parameters.${name}`)
    if (layer.environment) environment = layer.environment
  }

  const document: MergedDocument = {}
  const origins: Origins = {classes: {}, parameters: {}}
  if (classes.size > 0) {
    document.classes = {}
    for (const [name, cls] of classes) {
      document.classes[name] = Object.fromEntries([...cls.parameters].map(([param, placed]) => [param, placed.value]))
      origins.classes[name] = {origin: cls.origin, parameters: Object.fromEntries([...cls.parameters].map(([param, placed]) => [param, placed.origin]))}
    }
  }

  if (parameters.size > 0) {
    document.parameters = Object.fromEntries([...parameters].map(([name, placed]) => [name, placed.value]))
    origins.parameters = Object.fromEntries([...parameters].map(([name, placed]) => [name, placed.origin]))
  }

  if (environment) {
    document.environment = environment.value
    origins.environment = environment.origin
  }

  return {document, origins, layers: layers.map(({name, file, digest}) => ({name, file, digest}))}
}

function setChecked(values: Map<string, Placed>, key: string, placed: Placed, path: string): void {
  const before = values.get(key)
  if (before) {
    const was = kind(before.value)
    const now = kind(placed.value)
    if (was !== null && now !== null && was !== now) {
      throw new InputError(
        `${at(placed.origin)}: layer ${placed.origin.layer}: ${path} is ${now} here but ${was} in layer ${before.origin.layer} (${at(before.origin)}); remove it first (remove: [${path}]) to change its kind`,
      )
    }
  }

  values.set(key, placed)
}

/** A value's kind for the conflict rule; nothing (null) goes with any kind. */
function kind(value: unknown): 'a mapping' | 'a list' | 'a scalar' | null {
  if (value === null || value === undefined) return null
  if (Array.isArray(value)) return 'a list'
  // A !secret is a string kept secret: it overrides a layer's plain default.
  return isMapping(value) && !(value instanceof Secret) ? 'a mapping' : 'a scalar'
}
