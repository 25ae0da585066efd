import {createHash} from 'node:crypto'

import {InputError, LocalpuppetError} from '../errors.js'
import {parseReleaseRef, type ReleaseRef} from '../release/release-ref.js'
import {closest} from '../util/did-you-mean.js'
import {isMapping} from '../util/json.js'
import {isValidLayerName} from './layer-name.js'
import {lineOfKey, parseYaml} from '../yaml.js'
import {RESERVED_VARIABLES, isValidClassName, isValidEnvironmentName, isValidParameterName} from './puppet-names.js'

/** Parameters localpuppet adds to every ENC document; users may not set them. */
export const PROVENANCE_PARAMETERS = ['localpuppet_release', 'localpuppet_run_id'] as const

const ALLOWED_KEYS = ['app', 'layers', 'classes', 'parameters', 'environment', 'remove'] as const

export type ClassList = string[] | Record<string, Record<string, unknown> | null>

/** A validated input.yaml: an ENC document plus the `app` key naming the release. */
export interface NodeInput {
  /** Where it came from, for messages: a path or `<stdin>`. */
  source: string
  /** `sha256:<hex>` of the bytes as read. */
  digest: string
  app: ReleaseRef
  classes?: ClassList
  parameters?: Record<string, unknown>
  environment?: string
  /** The layers it names, in order (see layers/README.md); absent in a flat input. */
  layers?: string[]
  /** What it removes from earlier layers (`classes.NAME`, `parameters.NAME`, ...). */
  remove?: string[]
  /** The mapping as parsed, app included, for the run record. */
  raw: Record<string, unknown>
  /** The text as read: the lines of the node's own values, for their origins once merged with layers. */
  text?: string
}

/** The input's classes by name, in the order written (a list, or the keys of a mapping). */
export function inputClassNames(input: Pick<NodeInput, 'classes'>): string[] {
  return input.classes === undefined || input.classes === null ? [] : Array.isArray(input.classes) ? input.classes : Object.keys(input.classes)
}

/**
 * Validates an input document and returns it, or throws the first problem as one
 * InputError line naming the file, the line where it can be found, and the key or entry
 * at fault.
 */
export function parseNodeInput(text: string, source: string): NodeInput {
  const {input, problems} = checkNodeInput(text, source)
  if (problems.length > 0) throw problems[0]
  return input!
}

/**
 * Every problem of an input document at once (for `validate`), and the input as far as
 * it could be read: present whenever `app` is readable, so the release can be checked too.
 */
export function checkNodeInput(text: string, source: string): {input: NodeInput | null; problems: LocalpuppetError[]} {
  const problems: LocalpuppetError[] = []
  const attempt = <T>(check: () => T): T | undefined => {
    try {
      return check()
    } catch (error) {
      if (!(error instanceof LocalpuppetError)) throw error
      problems.push(error)
      return undefined
    }
  }

  const doc = attempt(() => parseYaml(text, source))
  if (problems.length > 0) return {input: null, problems}
  const at = (...path: string[]): string => {
    const line = lineOfKey(text, path)
    return line === undefined ? source : `${source}:${line}`
  }

  if (doc === null || doc === undefined) {
    return {input: null, problems: [new InputError(`${source}: empty document; expected a mapping with app, classes, parameters, environment`)]}
  }

  if (!isMapping(doc)) {
    return {input: null, problems: [new InputError(`${source}: expected a mapping with app, classes, parameters, environment, got ${kindOf(doc)}`)]}
  }

  for (const key of Object.keys(doc)) {
    if (!(ALLOWED_KEYS as readonly string[]).includes(key)) {
      const guess = closest(key, ALLOWED_KEYS)
      problems.push(
        new InputError(`${at(key)}: unknown key ${JSON.stringify(key)}${guess ? ` (did you mean ${guess}?)` : ''}; allowed: ${ALLOWED_KEYS.join(', ')}`),
      )
    }
  }

  let app: ReleaseRef | undefined
  if (!('app' in doc) || doc.app === null || doc.app === undefined) {
    problems.push(new InputError(`${source}: missing required key app (e.g. app: foo/tags/1.2.0)`))
  } else {
    app = attempt(() => parseReleaseRef(doc.app, `${at('app')}: app`))
  }

  const classes = doc.classes === null || doc.classes === undefined ? undefined : attempt(() => parseClasses(doc.classes, at))
  const parameters = doc.parameters === null || doc.parameters === undefined ? undefined : attempt(() => parseParameters(doc.parameters, at))
  const environment = doc.environment === null || doc.environment === undefined ? undefined : attempt(() => parseEnvironment(doc.environment, at))
  const layers = doc.layers === null || doc.layers === undefined ? undefined : attempt(() => parseNames('layers', doc.layers, at, isValidLayerName, 'a layer name (path-like: site/dc1, role/web)'))
  const remove = doc.remove === null || doc.remove === undefined ? undefined : attempt(() => parseNames('remove', doc.remove, at, (path) => typeof path === 'string', 'a path (classes.NAME, classes.NAME.PARAM, parameters.NAME, environment)'))
  if (app === undefined) return {input: null, problems}
  const input: NodeInput = {source, digest: `sha256:${createHash('sha256').update(text).digest('hex')}`, app, raw: doc, text}
  if (layers !== undefined) input.layers = layers
  if (remove !== undefined) input.remove = remove
  if (classes !== undefined) input.classes = classes
  if (parameters !== undefined) input.parameters = parameters
  if (environment !== undefined) input.environment = environment
  return {input, problems}
}

function parseNames(key: string, value: unknown, at: (...path: string[]) => string, valid: (name: unknown) => boolean, what: string): string[] {
  if (!Array.isArray(value)) throw new InputError(`${at(key)}: ${key} must be a list, got ${kindOf(value)}`)
  for (const [index, name] of value.entries()) {
    if (!valid(name)) throw new InputError(`${at(key)}: ${key}[${index}]: ${JSON.stringify(name)} is not ${what}`)
  }

  return value as string[]
}

function parseEnvironment(value: unknown, at: (...path: string[]) => string): string {
  if (typeof value !== 'string') {
    throw new InputError(`${at('environment')}: environment must be a string (quote it: environment: '${String(value)}')`)
  }

  if (!isValidEnvironmentName(value)) {
    throw new InputError(`${at('environment')}: environment ${JSON.stringify(value)} is not a valid Puppet environment name (lowercase letters, digits, underscores)`)
  }

  return value
}

function parseClasses(value: unknown, at: (...path: string[]) => string): ClassList {
  if (Array.isArray(value)) {
    const seen = new Set<string>()
    for (const [index, name] of value.entries()) {
      if (typeof name !== 'string' || !isValidClassName(name)) {
        throw new InputError(`${at('classes')}: classes[${index}]: ${JSON.stringify(name)} is not a valid Puppet class name`)
      }

      if (seen.has(name)) throw new InputError(`${at('classes')}: classes[${index}]: class ${name} is listed twice`)
      seen.add(name)
    }

    return value as string[]
  }

  if (!isMapping(value)) {
    throw new InputError(`${at('classes')}: classes must be a list of class names or a mapping of class name to parameters, got ${kindOf(value)}`)
  }

  for (const [name, params] of Object.entries(value)) {
    if (!isValidClassName(name)) {
      throw new InputError(`${at('classes', name)}: classes: ${JSON.stringify(name)} is not a valid Puppet class name`)
    }

    if (params === null || params === undefined) continue
    if (!isMapping(params)) {
      throw new InputError(`${at('classes', name)}: classes.${name}: expected a mapping of parameter to value or nothing, got ${kindOf(params)}`)
    }

    for (const param of Object.keys(params)) {
      if (!isValidParameterName(param)) {
        throw new InputError(`${at('classes', name, param)}: classes.${name}: ${JSON.stringify(param)} is not a valid class parameter name`)
      }
    }
  }

  return value as ClassList
}

function parseParameters(value: unknown, at: (...path: string[]) => string): Record<string, unknown> {
  if (!isMapping(value)) throw new InputError(`${at('parameters')}: parameters must be a mapping of name to value, got ${kindOf(value)}`)
  for (const name of Object.keys(value)) {
    if ((PROVENANCE_PARAMETERS as readonly string[]).includes(name)) {
      throw new InputError(`${at('parameters', name)}: parameters.${name} is set by localpuppet itself and cannot be given in the input`)
    }

    if (RESERVED_VARIABLES.has(name)) {
      throw new InputError(`${at('parameters', name)}: parameters.${name} is a variable Puppet reserves for itself`)
    }

    if (!isValidParameterName(name)) {
      throw new InputError(`${at('parameters', name)}: parameters: ${JSON.stringify(name)} is not a valid Puppet variable name`)
    }
  }

  return value
}

function kindOf(value: unknown): string {
  if (value === null || value === undefined) return 'nothing'
  if (Array.isArray(value)) return 'a list'
  if (typeof value === 'object') return 'a mapping'
  return `${typeof value} ${JSON.stringify(value)}`
}
