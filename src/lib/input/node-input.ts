import {createHash} from 'node:crypto'

import {InputError} from '../errors.js'
import {parseReleaseRef, type ReleaseRef} from '../release/release-ref.js'
import {closest} from '../util/did-you-mean.js'
import {lineOfKey, parseYaml} from '../yaml.js'
import {RESERVED_VARIABLES, isValidClassName, isValidEnvironmentName, isValidParameterName} from './puppet-names.js'

/** Parameters localpuppet adds to every ENC document; users may not set them. */
export const PROVENANCE_PARAMETERS = ['localpuppet_release', 'localpuppet_run_id'] as const

const ALLOWED_KEYS = ['app', 'classes', 'parameters', 'environment'] as const

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
  /** The mapping as parsed, app included, for the run record. */
  raw: Record<string, unknown>
}

/**
 * Validates an input document. Every problem is one InputError line naming the file,
 * the line where it can be found, and the key or entry at fault.
 */
export function parseNodeInput(text: string, source: string): NodeInput {
  const doc = parseYaml(text, source)
  const at = (...path: string[]): string => {
    const line = lineOfKey(text, path)
    return line === undefined ? source : `${source}:${line}`
  }

  if (doc === null || doc === undefined) {
    throw new InputError(`${source}: empty document; expected a mapping with app, classes, parameters, environment`)
  }

  if (!isMapping(doc)) {
    throw new InputError(`${source}: expected a mapping with app, classes, parameters, environment, got ${kindOf(doc)}`)
  }

  for (const key of Object.keys(doc)) {
    if (!(ALLOWED_KEYS as readonly string[]).includes(key)) {
      const guess = closest(key, ALLOWED_KEYS)
      throw new InputError(
        `${at(key)}: unknown key ${JSON.stringify(key)}${guess ? ` (did you mean ${guess}?)` : ''}; allowed: ${ALLOWED_KEYS.join(', ')}`,
      )
    }
  }

  if (!('app' in doc) || doc.app === null || doc.app === undefined) {
    throw new InputError(`${source}: missing required key app (e.g. app: foo/tags/1.2.0)`)
  }

  const app = parseReleaseRef(doc.app, `${at('app')}: app`)
  const input: NodeInput = {source, digest: `sha256:${createHash('sha256').update(text).digest('hex')}`, app, raw: doc}

  if (doc.classes !== null && doc.classes !== undefined) input.classes = parseClasses(doc.classes, at)
  if (doc.parameters !== null && doc.parameters !== undefined) input.parameters = parseParameters(doc.parameters, at)
  if (doc.environment !== null && doc.environment !== undefined) {
    if (typeof doc.environment !== 'string') {
      throw new InputError(`${at('environment')}: environment must be a string (quote it: environment: '${String(doc.environment)}')`)
    }

    if (!isValidEnvironmentName(doc.environment)) {
      throw new InputError(
        `${at('environment')}: environment ${JSON.stringify(doc.environment)} is not a valid Puppet environment name (lowercase letters, digits, underscores)`,
      )
    }

    input.environment = doc.environment
  }

  return input
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

function isMapping(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value)
}

function kindOf(value: unknown): string {
  if (value === null || value === undefined) return 'nothing'
  if (Array.isArray(value)) return 'a list'
  if (typeof value === 'object') return 'a mapping'
  return `${typeof value} ${JSON.stringify(value)}`
}
