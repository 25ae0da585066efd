import {readBoundedFile} from '../util/bounded-read.js'
import {DamagedRecordError} from '../errors.js'

/**
 * A report larger than this is not read: Puppet's report of a run is some 2 KiB per
 * resource plus its log, so this is tens of thousands of resources.
 */
export const MAX_REPORT_BYTES = 64 * 1024 * 1024

/**
 * Resource types whose every run is a change by design, never a state on the system: a
 * `notify` logs its message each time it is applied.
 */
const STATELESS_TYPES = new Set(['Notify'])

/**
 * The resources Puppet's report (last_run_report.yaml) says the run changed on the system:
 * those with an event on a property (content, ensure, mode, an exec's returns), in the
 * report's order. A refresh (a service restarted, a refreshonly exec triggered) is not
 * such an event: it follows a change, it is not one; nor is a `notify`. Null when there is
 * no report or it cannot be read (a catalog that does not compile leaves none).
 */
export async function readChangedResources(path: string): Promise<string[] | null> {
  let doc: unknown
  try {
    const bytes = await readBoundedFile(path, {maxBytes: MAX_REPORT_BYTES, label: `puppet report ${path}`, error: (message) => new DamagedRecordError(message), noFollow: true})
    // Loaded here, not at start-up: only a run whose fingerprint did not change reads Puppet's report.
    const {default: yaml} = await import('js-yaml')
    doc = yaml.load(bytes.toString('utf8'), {schema: rubyTolerantSchema(yaml)})
  } catch {
    return null
  }

  const statuses = (doc as {resource_statuses?: unknown} | null)?.resource_statuses
  if (statuses === null || typeof statuses !== 'object' || Array.isArray(statuses)) return null
  const changed: string[] = []
  for (const [name, status] of Object.entries(statuses as Record<string, unknown>)) {
    if (status === null || typeof status !== 'object') continue
    const {resource_type: type, changed: isChanged, events} = status as {resource_type?: unknown; changed?: unknown; events?: unknown}
    if (isChanged !== true || (typeof type === 'string' && STATELESS_TYPES.has(type)) || !Array.isArray(events)) continue
    const propertyChanged = events.some((event) => {
      const {property, status: outcome} = (event ?? {}) as {property?: unknown; status?: unknown}
      return typeof property === 'string' && property !== '' && outcome === 'success'
    })
    if (propertyChanged) changed.push(name)
  }

  return changed
}

type JsYaml = typeof import('js-yaml').default

/**
 * YAML 1.2 core types, and Psych's Ruby object tags (`!ruby/object:Puppet::Transaction::Report`,
 * `!ruby/sym`, ...) read as the plain mapping, sequence or scalar they tag.
 */
function rubyTolerantSchema(yaml: JsYaml): import('js-yaml').Schema {
  const kinds = ['mapping', 'sequence', 'scalar'] as const
  const types = kinds.map((kind) => new yaml.Type('!ruby/', {kind, multi: true, construct: (data: unknown) => data}))
  return yaml.CORE_SCHEMA.extend(types)
}
