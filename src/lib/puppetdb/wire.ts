import {createHash} from 'node:crypto'

import type {PuppetDbCommand} from './client.js'

/*
 * PuppetDB 7's wire formats, made from what `puppet apply` left in the run's directory:
 * report v8 (from --lastrunreport's YAML, converted as puppetdb-terminus' report processor
 * does), facts v5 (from the facts cache, client_data/facts/NAME.json) and catalog v9 (from
 * the catalog cache, client_data/catalog/NAME.json, as the terminus munges it: no `kind`,
 * sensitive parameters dropped, containment and relationship edges). Pure functions: the
 * caller reads the files, bounded.
 */

/** What localpuppet adds to each command: which release made it, which run, with which input. */
export interface RunStamp {
  certname: string
  /** The release's reference and its install record's digest: `foo/tags/1.6.0@sha256:...`. */
  codeId: string
  runId: string
  release: string
  /** The input's app as written (`foo/channels/stable`): what the node follows. */
  ref: string | null
  inputDigest: string | null
  puppet: {implementation: string | null; version: string | null}
  /** The run's outcome, as its record says (succeeded, failed, error, interrupted, refused). */
  state: string
  noop: boolean
  environment: string
  startedAt: string
  finishedAt: string
  /** Why the attempt failed, when Puppet wrote no report (a catalog that did not compile, a refusal): Puppet's first error, else localpuppet's. */
  error: string | null
  firstError: string | null
  /**
   * localpuppet's drift (see drift/; Puppet computes none under `puppet apply`): how many
   * resources the run corrected, and (some of) which, as `Type[title]`. Absent or null: not
   * known (a noop run, a run Puppet reported nothing of).
   */
  correctiveChange?: number | null
  corrected?: string[]
  /** When the commands were made: their producer_timestamp. */
  producedAt: string
}

type Json = Record<string, unknown>

const isMap = (value: unknown): value is Json => value !== null && typeof value === 'object' && !Array.isArray(value)
const text = (value: unknown): string | null => (value === null || value === undefined ? null : typeof value === 'string' ? value : String(value))
const time = (value: unknown, fallback: string): string => {
  const parsed = typeof value === 'string' || value instanceof Date ? new Date(value) : null
  return parsed && !Number.isNaN(parsed.getTime()) ? parsed.toISOString() : fallback
}

/** A UUID made from a run's id: the same run always gives the same one (a report spooled twice is the same report). */
export function runUuid(runId: string, what: string): string {
  const hex = createHash('sha256').update(`localpuppet:${what}:${runId}`).digest('hex')
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-5${hex.slice(13, 16)}-${((Number.parseInt(hex[16], 16) & 3) | 8).toString(16)}${hex.slice(17, 20)}-${hex.slice(20, 32)}`
}

/**
 * store report v8 from Puppet's report (the YAML's data, or null when Puppet wrote none
 * this run: then a report of the attempt itself, failed, with its error as a log line).
 */
export function reportCommand(report: Json | null, stamp: RunStamp): PuppetDbCommand {
  const payload = report ? fromPuppetReport(report, stamp) : attemptReport(stamp)
  return {command: 'store report', version: 8, certname: stamp.certname, producerTimestamp: stamp.producedAt, payload}
}

function fromPuppetReport(report: Json, stamp: RunStamp): Json {
  const metrics: Json[] = []
  let total = 0
  for (const [category, metric] of Object.entries(isMap(report.metrics) ? report.metrics : {})) {
    const values = isMap(metric) && Array.isArray(metric.values) ? metric.values : []
    for (const entry of values) {
      if (!Array.isArray(entry) || typeof entry[0] !== 'string' || typeof entry[2] !== 'number' || !Number.isFinite(entry[2])) continue
      metrics.push({category: isMap(metric) && typeof metric.name === 'string' ? metric.name : category, name: entry[0], value: entry[2]})
      if (category === 'time' && entry[0] === 'total') total = entry[2]
    }
  }

  // localpuppet's drift where an agent's report has Puppet's: the resources metric, the report's and each resource's flag.
  const drift = typeof stamp.correctiveChange === 'number' && !stamp.noop ? stamp.correctiveChange : null
  const corrected = new Set(stamp.corrected ?? [])
  if (drift !== null) {
    const kept = metrics.filter((metric) => !(metric.category === 'resources' && metric.name === 'corrective_change'))
    metrics.splice(0, metrics.length, ...kept, {category: 'resources', name: 'corrective_change', value: drift})
  }

  const start = time(report.time, stamp.startedAt)
  const statuses = isMap(report.resource_statuses) ? Object.values(report.resource_statuses).filter(isMap) : []
  const resources = statuses
    .map((status) => ({
      skipped: status.skipped === true,
      timestamp: time(status.time, start),
      resource_type: text(status.resource_type) ?? '',
      resource_title: text(status.title) ?? '',
      file: text(status.file),
      line: typeof status.line === 'number' ? status.line : null,
      containment_path: Array.isArray(status.containment_path) ? status.containment_path.map((part) => String(part)) : [],
      corrective_change: drift === null ? (typeof status.corrective_change === 'boolean' ? status.corrective_change : null) : corrected.has(`${text(status.resource_type)}[${text(status.title)}]`),
      events: (Array.isArray(status.events) ? status.events.filter(isMap) : []).map((event) => ({
        status: text(event.status) ?? 'success',
        timestamp: time(event.time, start),
        name: text(event.name),
        property: text(event.property),
        new_value: text(event.desired_value) ?? '',
        old_value: text(event.previous_value) ?? '',
        corrective_change: typeof event.corrective_change === 'boolean' ? event.corrective_change : null,
        message: text(event.message),
      })),
    }))
    // As puppetdb-terminus does by default: resources that did something, or were skipped.
    .filter((resource) => resource.events.length > 0 || resource.skipped)
  const logs = (Array.isArray(report.logs) ? report.logs.filter(isMap) : []).map((log) => ({
    file: text(log.file),
    line: typeof log.line === 'number' ? log.line : null,
    level: text(log.level) ?? 'notice',
    message: text(log.message) ?? '',
    source: text(log.source) ?? 'Puppet',
    tags: Array.isArray(log.tags) ? log.tags.map((tag) => String(tag)) : [],
    time: time(log.time, start),
  }))
  const transactionUuid = text(report.transaction_uuid) ?? runUuid(stamp.runId, 'transaction')
  return {
    certname: stamp.certname,
    environment: text(report.environment) ?? stamp.environment,
    puppet_version: text(report.puppet_version) ?? stamp.puppet.version ?? 'unknown',
    report_format: typeof report.report_format === 'number' ? report.report_format : 12,
    configuration_version: text(report.configuration_version) ?? stamp.runId,
    start_time: start,
    end_time: new Date(new Date(start).getTime() + Math.round(total * 1000)).toISOString(),
    producer_timestamp: stamp.producedAt,
    producer: stamp.certname,
    resources,
    metrics,
    logs,
    transaction_uuid: transactionUuid,
    catalog_uuid: text(report.catalog_uuid) ?? transactionUuid,
    code_id: stamp.codeId,
    job_id: stamp.runId,
    cached_catalog_status: text(report.cached_catalog_status) ?? 'not_used',
    // The run's verdict wins: a run localpuppet judged failed is failed in PuppetDB too.
    status: stamp.state === 'succeeded' ? (text(report.status) === 'failed' ? 'failed' : (text(report.status) ?? 'unchanged')) : 'failed',
    noop: typeof report.noop === 'boolean' ? report.noop : stamp.noop,
    corrective_change: drift === null ? (typeof report.corrective_change === 'boolean' ? report.corrective_change : null) : drift > 0,
    noop_pending: typeof report.noop_pending === 'boolean' ? report.noop_pending : null,
    type: 'agent',
  }
}

/** A report for an attempt Puppet wrote none for: failed, its error as Puppet's would be (an `err` log). */
function attemptReport(stamp: RunStamp): Json {
  const message = (stamp.firstError?.replace(/^Error: /, '') ?? stamp.error ?? `the attempt ended ${stamp.state}`).slice(0, 10_000)
  const uuid = runUuid(stamp.runId, 'transaction')
  return {
    certname: stamp.certname,
    environment: stamp.environment,
    puppet_version: stamp.puppet.version ?? 'unknown',
    report_format: 12,
    configuration_version: stamp.runId,
    start_time: stamp.startedAt,
    end_time: stamp.finishedAt,
    producer_timestamp: stamp.producedAt,
    producer: stamp.certname,
    resources: [],
    metrics: [],
    logs: [{file: null, line: null, level: 'err', message, source: stamp.firstError ? 'Puppet' : 'localpuppet', tags: ['err'], time: stamp.finishedAt}],
    transaction_uuid: uuid,
    catalog_uuid: uuid,
    code_id: stamp.codeId,
    job_id: stamp.runId,
    cached_catalog_status: 'not_used',
    status: 'failed',
    noop: stamp.noop,
    corrective_change: null,
    noop_pending: null,
    type: 'agent',
  }
}

/** replace facts v5 from Puppet's facts cache, with a `localpuppet` fact: the release, run, input digest and Puppet that made this run. */
export function factsCommand(facts: Json, stamp: RunStamp): PuppetDbCommand {
  const values = isMap(facts.values) ? {...facts.values} : {}
  values.localpuppet = {
    release: stamp.release,
    ref: stamp.ref,
    code_id: stamp.codeId,
    run_id: stamp.runId,
    state: stamp.state,
    input_digest: stamp.inputDigest,
    puppet_implementation: stamp.puppet.implementation,
    puppet_version: stamp.puppet.version,
  }
  return {
    command: 'replace facts',
    version: 5,
    certname: stamp.certname,
    producerTimestamp: stamp.producedAt,
    payload: {certname: stamp.certname, environment: stamp.environment, producer_timestamp: stamp.producedAt, producer: stamp.certname, values},
  }
}

const RELATIONSHIPS: Record<string, {forward: boolean; relationship: string}> = {
  before: {forward: true, relationship: 'before'},
  require: {forward: false, relationship: 'required-by'},
  notify: {forward: true, relationship: 'notifies'},
  subscribe: {forward: false, relationship: 'subscription-of'},
}

function parseRef(ref: unknown): {type: string; title: string} | null {
  const match = typeof ref === 'string' ? /^([^[\]]+)\[(.+)\]$/s.exec(ref) : null
  return match ? {type: match[1], title: match[2]} : null
}

/**
 * A parameter's value with every Sensitive in it redacted as Puppet shows one: Puppet lists in
 * sensitive_parameters only a parameter whose whole value is Sensitive, and writes one inside a
 * hash or a list as rich data, `{"__ptype": "Sensitive", "__pvalue": <in clear>}`.
 */
function withoutSensitive(value: unknown): unknown {
  if (Array.isArray(value)) return value.map((element) => withoutSensitive(element))
  if (!isMap(value)) return value
  if (value.__ptype === 'Sensitive') return 'Sensitive [value redacted]'
  return Object.fromEntries(Object.entries(value).map(([key, element]) => [key, withoutSensitive(element)]))
}

/** replace catalog v9 from Puppet's catalog cache; `transactionUuid`: the report's, linking the two. */
export function catalogCommand(catalog: Json, stamp: RunStamp, transactionUuid: string | null): PuppetDbCommand {
  const resources = (Array.isArray(catalog.resources) ? catalog.resources.filter(isMap) : []).map((resource) => {
    const parameters = isMap(resource.parameters) ? (withoutSensitive(resource.parameters) as Json) : {}
    // Never in PuppetDB: what Puppet marked Sensitive.
    if (Array.isArray(resource.sensitive_parameters)) for (const name of resource.sensitive_parameters) delete parameters[String(name)]
    return {
      type: String(resource.type),
      title: String(resource.title),
      exported: resource.exported === true,
      tags: Array.isArray(resource.tags) ? [...new Set(resource.tags.map(String))] : [],
      ...(typeof resource.file === 'string' ? {file: resource.file} : {}),
      ...(typeof resource.line === 'number' ? {line: resource.line} : {}),
      parameters,
    }
  })
  const known = new Set(resources.map((resource) => `${resource.type}[${resource.title}]`))
  const edges: Json[] = []
  const seen = new Set<string>()
  const edge = (source: {type: string; title: string} | null, target: {type: string; title: string} | null, relationship: string) => {
    if (!source || !target || !known.has(`${source.type}[${source.title}]`) || !known.has(`${target.type}[${target.title}]`)) return
    const key = JSON.stringify([source, target, relationship])
    if (seen.has(key)) return
    seen.add(key)
    edges.push({source, target, relationship})
  }

  for (const entry of Array.isArray(catalog.edges) ? catalog.edges.filter(isMap) : []) edge(parseRef(entry.source), parseRef(entry.target), 'contains')
  for (const resource of resources) {
    const self = {type: resource.type, title: resource.title}
    for (const [param, how] of Object.entries(RELATIONSHIPS)) {
      const value = resource.parameters[param]
      for (const ref of Array.isArray(value) ? value : value === undefined ? [] : [value]) {
        const other = parseRef(ref)
        if (how.forward) edge(self, other, how.relationship)
        else edge(other, self, how.relationship)
      }
    }
  }

  const name = typeof catalog.name === 'string' ? catalog.name : stamp.certname
  return {
    command: 'replace catalog',
    version: 9,
    certname: stamp.certname,
    producerTimestamp: stamp.producedAt,
    payload: {
      certname: name === stamp.certname ? name : stamp.certname,
      version: text(catalog.version) ?? stamp.runId,
      environment: text(catalog.environment) ?? stamp.environment,
      transaction_uuid: transactionUuid ?? runUuid(stamp.runId, 'transaction'),
      catalog_uuid: text(catalog.catalog_uuid) ?? runUuid(stamp.runId, 'catalog'),
      code_id: stamp.codeId,
      job_id: stamp.runId,
      producer_timestamp: stamp.producedAt,
      producer: stamp.certname,
      resources,
      edges,
    },
  }
}
