import {InputError} from '../errors.js'
import {Secret, isSecretMarker} from '../util/secret.js'
import {isMapping} from '../util/json.js'
import {parseYaml} from '../yaml.js'

/**
 * How an input marks a value secret: the YAML tag `!secret` on a class parameter's value
 * (`password: !secret hunter2`). A tag, not "every value of an encrypted input": most
 * parameters of an encrypted input are not secret, and a module receives a secret as
 * Sensitive, which its parameter must be typed to accept; marking every value would break
 * every module that types a port as Integer. Only a class parameter's whole value: that is
 * what Hiera's automatic parameter lookup can hand Puppet as Sensitive (see hiera-secrets.ts).
 */
export const SECRET_TAG = '!secret'

/** Whether a node input (YAML text, already valid) marks any value secret; a `!secret` out of place is 65 naming it. */
export function marksSecrets(document: Uint8Array | string, source: string): boolean {
  const text = typeof document === 'string' ? document : Buffer.from(document).toString('utf8')
  if (!text.includes(SECRET_TAG)) return false
  const doc = parseYaml(text, source)
  if (!isMapping(doc)) return false
  const parameters = isMapping(doc.parameters) ? doc.parameters : undefined
  return Object.keys(splitSecrets({classes: doc.classes, parameters, source}).secrets).length > 0
}

/**
 * Where a layer (published in plain text, shared by every node that names it) marks a
 * secret: the path of its first `!secret`, or null. A layer can hold no secret: what it
 * holds is served to anyone who can read the web server.
 */
export function layerSecretPath(document: Uint8Array | string, source: string): string[] | null {
  const text = typeof document === 'string' ? document : Buffer.from(document).toString('utf8')
  if (!text.includes(SECRET_TAG)) return null
  return findSecrets(parseYaml(text, source))[0]?.path ?? null
}

function findSecrets(value: unknown, path: string[] = []): Array<{path: string[]; secret: Secret}> {
  if (value instanceof Secret) return [{path, secret: value}]
  if (Array.isArray(value)) return value.flatMap((item, i) => findSecrets(item, [...path, String(i)]))
  if (isMapping(value)) return Object.entries(value).flatMap(([key, item]) => findSecrets(item, [...path, key]))
  return []
}

/** The Hiera key of a class parameter (what automatic parameter lookup asks for): `mysql::server::root_password`. */
export function secretKey(className: string, parameter: string): string {
  return `${className.replace(/^::/, '')}::${parameter}`
}

/**
 * An input's classes with the secret parameters taken out, and the secrets by Hiera key.
 * Puppet gives a class parameter set by the ENC exactly the value the ENC printed (a String
 * never becomes Sensitive: Puppet refuses it for a Sensitive parameter), while a value
 * found by automatic parameter lookup can be Sensitive (the run's Hiera backend returns it
 * so); so a secret must not be in the ENC. A `!secret` anywhere else (a top-scope
 * parameter, inside a hash or list, a whole class) is refused (65) naming it.
 */
export function splitSecrets<T extends {classes?: unknown; parameters?: Record<string, unknown>; source: string}>(input: T): {input: T; secrets: Record<string, Secret>} {
  const secrets: Record<string, Secret> = {}
  const misplaced = (path: string[]) =>
    new InputError(`${input.source}: ${path.join('.')}: !secret marks only a class parameter's whole value (classes.CLASS.PARAM: !secret VALUE), which modules receive as Sensitive`)
  const stray = findSecrets(input.parameters ?? {}, ['parameters'])
  if (stray.length > 0) throw misplaced(stray[0].path)
  if (!isMapping(input.classes)) return {input, secrets}
  const classes: Record<string, unknown> = {}
  for (const [name, params] of Object.entries(input.classes)) {
    if (params instanceof Secret) throw misplaced(['classes', name])
    if (!isMapping(params)) {
      classes[name] = params
      continue
    }

    const kept: Record<string, unknown> = {}
    for (const [param, value] of Object.entries(params)) {
      if (value instanceof Secret) {
        secrets[secretKey(name, param)] = value
        continue
      }

      const nested = findSecrets(value, ['classes', name, param])
      if (nested.length > 0) throw misplaced(nested[0].path)
      kept[param] = value
    }

    classes[name] = kept
  }

  return {input: Object.keys(secrets).length === 0 ? input : {...input, classes}, secrets}
}

/**
 * A recorded document (secrets redacted to their markers) with its secrets put back, for
 * --replay and rollback: each marker of a class parameter must find its value, with the
 * same digest (keyed by `digestKey`, the node's: secret-digest.ts; or the unkeyed `sha256:`
 * of a run recorded before), among the secrets that run kept encrypted (65 otherwise, naming it).
 */
export function restoreSecrets(document: Record<string, unknown>, kept: Record<string, string>, label: string, digestKey: Uint8Array | null = null): Record<string, unknown> {
  if (!isMapping(document.classes)) return document
  const classes: Record<string, unknown> = {}
  for (const [name, params] of Object.entries(document.classes)) {
    if (!isMapping(params)) {
      classes[name] = params
      continue
    }

    classes[name] = Object.fromEntries(
      Object.entries(params).map(([param, value]) => {
        if (!isSecretMarker(value)) return [param, value]
        const key = secretKey(name, param)
        const secret = Object.hasOwn(kept, key) ? new Secret(kept[key], digestKey) : undefined
        if (!secret || !secret.matchesDigest(value.localpuppet_secret, digestKey)) throw new InputError(`${label}: the secret ${key} (${value.localpuppet_secret}) is not among the secrets that run kept; it cannot be replayed`)
        return [param, secret]
      }),
    )
  }

  return {...document, classes}
}

/** The secrets by class (as the input names it) and parameter, revealed: for a compile that gives them to Puppet as Sensitive. */
export function secretsByClass(input: {classes?: unknown}, secrets: Record<string, Secret>): Record<string, Record<string, string>> {
  const byClass: Record<string, Record<string, string>> = {}
  if (!isMapping(input.classes)) return byClass
  for (const [name, params] of Object.entries(input.classes)) {
    if (!isMapping(params)) continue
    for (const param of Object.keys(params)) {
      const secret = secrets[secretKey(name, param)]
      if (secret) (byClass[name] ??= {})[param] = secret.reveal()
    }
  }

  return byClass
}
