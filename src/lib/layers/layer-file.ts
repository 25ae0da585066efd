import {createHash} from 'node:crypto'

import {InputError} from '../errors.js'
import {PROVENANCE_PARAMETERS} from '../input/node-input.js'
import {RESERVED_VARIABLES, isValidClassName, isValidEnvironmentName, isValidParameterName} from '../input/puppet-names.js'
import {isMapping} from '../util/json.js'
import {parseYaml} from '../yaml.js'
import {keyLines} from './key-lines.js'
import {isValidLayerName} from '../input/layer-name.js'

/** Where a value was set: the layer (`release foo/tags/1.0.0`, `site/dc1`, `node`), its file and line. */
export interface Origin {
  layer: string
  file: string
  line: number | null
}

/** A value as a layer wrote it, with its origin. */
export interface Placed<T = unknown> {
  value: T
  origin: Origin
}

/** One class as a layer names it: where, and its parameters (possibly none). */
export interface LayerClass {
  origin: Origin
  parameters: Map<string, Placed>
}

/** What a removal names: a class, one class parameter, a top-level parameter, or the environment. */
export type Removal = {origin: Origin; path: string} & ({kind: 'class'; name: string} | {kind: 'class-parameter'; name: string; parameter: string} | {kind: 'parameter'; name: string} | {kind: 'environment'})

/** One layer as read: what it includes (before itself), removes, and sets. */
export interface Layer {
  name: string
  file: string
  /** `sha256:<hex>` of the file's bytes. */
  digest: string
  /** Layers this one includes (`layers:`), in order: merged before it. */
  includes: Array<Placed<string>>
  removals: Removal[]
  classes: Map<string, LayerClass>
  parameters: Map<string, Placed>
  environment?: Placed<string>
}

/** The keys a layer may hold; a node input adds `app`. */
export const LAYER_KEYS = ['layers', 'remove', 'classes', 'parameters', 'environment'] as const

export interface ParseLayerOptions {
  /** Keys besides LAYER_KEYS the document may hold and the layer ignores (`app` in a node input). */
  extraKeys?: readonly string[]
  /** False for the release's own layer: it cannot name the operator's layers. */
  includes?: boolean
}

/**
 * Parses one layer document, or throws its first problem (65) as one line naming the
 * file, line, layer and key at fault. A layer holds `classes` (a list, or a mapping of
 * class to parameters), `parameters`, `environment`, `remove` (dotted paths:
 * `classes.NAME`, `classes.NAME.PARAM`, `parameters.NAME`, `environment`) and `layers`
 * (names of layers merged before it).
 */
export function parseLayer(text: string, file: string, name: string, options: ParseLayerOptions = {}): Layer {
  const doc = parseYaml(text, file)
  const lineOf = keyLines(text)
  const origin = (...path: string[]): Origin => ({layer: name, file, line: lineOf(path) ?? null})
  const refuse = (path: string[], message: string) => {
    // The entry's own line, else its key's (an item lineOfKey cannot name, such as a number).
    const line = lineOf(path) ?? lineOf(path.slice(0, 1))
    return new InputError(`${file}${line === undefined ? '' : `:${line}`}: layer ${name}: ${message}`)
  }

  const layer: Layer = {name, file, digest: `sha256:${createHash('sha256').update(text).digest('hex')}`, includes: [], removals: [], classes: new Map(), parameters: new Map()}
  if (doc === null || doc === undefined) return layer
  if (!isMapping(doc)) throw refuse([], `expected a mapping with ${LAYER_KEYS.join(', ')}, got ${kindOf(doc)}`)
  const allowed = [...LAYER_KEYS, ...(options.extraKeys ?? [])].filter((key) => key !== 'layers' || options.includes !== false)
  for (const key of Object.keys(doc)) {
    if (!allowed.includes(key)) throw refuse([key], `unknown key ${JSON.stringify(key)}; allowed: ${allowed.join(', ')}`)
  }

  if (doc.layers !== undefined && doc.layers !== null) {
    if (!Array.isArray(doc.layers)) throw refuse(['layers'], `layers must be a list of layer names, got ${kindOf(doc.layers)}`)
    for (const [index, included] of doc.layers.entries()) {
      if (!isValidLayerName(included)) throw refuse(['layers', String(included)], `layers[${index}]: ${JSON.stringify(included)} is not a layer name (path-like: site/dc1, role/web)`)
      layer.includes.push({value: included, origin: origin('layers', included)})
    }
  }

  if (doc.remove !== undefined && doc.remove !== null) {
    if (!Array.isArray(doc.remove)) throw refuse(['remove'], `remove must be a list of paths (classes.NAME, classes.NAME.PARAM, parameters.NAME, environment), got ${kindOf(doc.remove)}`)
    for (const [index, path] of doc.remove.entries()) {
      const removal = parseRemoval(path, origin('remove', String(path)))
      if (!removal) throw refuse(['remove', String(path)], `remove[${index}]: ${JSON.stringify(path)} is not classes.NAME, classes.NAME.PARAM, parameters.NAME or environment`)
      layer.removals.push(removal)
    }
  }

  if (doc.classes !== undefined && doc.classes !== null) {
    if (Array.isArray(doc.classes)) {
      for (const [index, cls] of doc.classes.entries()) {
        if (typeof cls !== 'string' || !isValidClassName(cls)) throw refuse(['classes', String(cls)], `classes[${index}]: ${JSON.stringify(cls)} is not a valid Puppet class name`)
        if (layer.classes.has(cls)) throw refuse(['classes', cls], `classes[${index}]: class ${cls} is listed twice`)
        layer.classes.set(cls, {origin: origin('classes', cls), parameters: new Map()})
      }
    } else if (isMapping(doc.classes)) {
      for (const [cls, params] of Object.entries(doc.classes)) {
        if (!isValidClassName(cls)) throw refuse(['classes', cls], `classes: ${JSON.stringify(cls)} is not a valid Puppet class name`)
        const entry: LayerClass = {origin: origin('classes', cls), parameters: new Map()}
        if (params !== null && params !== undefined) {
          if (!isMapping(params)) throw refuse(['classes', cls], `classes.${cls}: a class is a mapping of parameter to value or nothing, got ${kindOf(params)}`)
          for (const [param, value] of Object.entries(params)) {
            if (!isValidParameterName(param)) throw refuse(['classes', cls, param], `classes.${cls}: ${JSON.stringify(param)} is not a valid class parameter name`)
            entry.parameters.set(param, {value, origin: origin('classes', cls, param)})
          }
        }

        layer.classes.set(cls, entry)
      }
    } else {
      throw refuse(['classes'], `classes must be a list of class names or a mapping of class name to parameters, got ${kindOf(doc.classes)}`)
    }
  }

  if (doc.parameters !== undefined && doc.parameters !== null) {
    if (!isMapping(doc.parameters)) throw refuse(['parameters'], `parameters must be a mapping of name to value, got ${kindOf(doc.parameters)}`)
    for (const [param, value] of Object.entries(doc.parameters)) {
      if ((PROVENANCE_PARAMETERS as readonly string[]).includes(param)) throw refuse(['parameters', param], `parameters.${param} is set by localpuppet itself`)
      if (RESERVED_VARIABLES.has(param)) throw refuse(['parameters', param], `parameters.${param} is a variable Puppet reserves for itself`)
      if (!isValidParameterName(param)) throw refuse(['parameters', param], `parameters: ${JSON.stringify(param)} is not a valid Puppet variable name`)
      layer.parameters.set(param, {value, origin: origin('parameters', param)})
    }
  }

  if (doc.environment !== undefined && doc.environment !== null) {
    if (typeof doc.environment !== 'string' || !isValidEnvironmentName(doc.environment)) throw refuse(['environment'], `environment ${JSON.stringify(doc.environment)} is not a valid Puppet environment name`)
    layer.environment = {value: doc.environment, origin: origin('environment')}
  }

  return layer
}

function parseRemoval(path: unknown, origin: Origin): Removal | null {
  if (typeof path !== 'string') return null
  if (path === 'environment') return {kind: 'environment', origin, path}
  const [head, name, parameter, ...rest] = path.split('.')
  if (rest.length > 0 || name === undefined) return null
  if (head === 'parameters' && parameter === undefined && isValidParameterName(name)) return {kind: 'parameter', name, origin, path}
  if (head !== 'classes' || !isValidClassName(name)) return null
  if (parameter === undefined) return {kind: 'class', name, origin, path}
  return isValidParameterName(parameter) ? {kind: 'class-parameter', name, parameter, origin, path} : null
}

/** `a mapping`, `a list`, `string "x"`: for messages. */
export function kindOf(value: unknown): string {
  if (value === null || value === undefined) return 'nothing'
  if (Array.isArray(value)) return 'a list'
  if (typeof value === 'object') return 'a mapping'
  return `${typeof value} ${JSON.stringify(value)}`
}

/** `file:line` of an origin, for messages. */
export function at(origin: Origin): string {
  return origin.line === null ? origin.file : `${origin.file}:${origin.line}`
}
