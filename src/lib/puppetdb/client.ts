import type {Stats} from 'node:fs'

import {FleetUnavailableError, InputError, UntrustedPathError, UsageError} from '../errors.js'
import {BoundedHttpError, type ClientTls, boundedRequest} from '../util/bounded-http.js'
import {readBoundedFile} from '../util/bounded-read.js'
import {displayPath} from '../util/shell-quote.js'
import {redactUrl, terminalText, terminalUrl} from '../util/terminal-text.js'

/** Where PuppetDB is and how to reach it: the puppetdb setting and its TLS files. */
export interface PuppetDbConfig {
  url: string
  ca: string | null
  cert: string | null
  key: string | null
}

/** One command of PuppetDB's command API (/pdb/cmd/v1), as sent and as spooled. */
export interface PuppetDbCommand {
  command: 'store report' | 'replace facts' | 'replace catalog'
  version: number
  certname: string
  /** Fixed when the command is made, never when it is sent: a command sent twice is the same command (PuppetDB keeps the newer of two facts or catalogs, and one report per hash). */
  producerTimestamp: string
  payload: Record<string, unknown>
}

/** The largest answer to a command: PuppetDB acknowledges with `{"uuid": ...}`. */
const MAX_ACK_BYTES = 64 * 1024
/**
 * The largest answer to a query, read whole and parsed (some 0.5 GB of memory at most):
 * fleet status asks for a few fields per report, some 200 bytes, so about 300,000 reports
 * within --lookback (a fleet of 6,000 nodes running every 30 minutes for a day). More is
 * 69, naming the query: a shorter --lookback reads less.
 */
export const MAX_QUERY_BYTES = 64 * 1024 * 1024
/** The most rows a query may answer. */
export const MAX_QUERY_ROWS = 1_000_000

export interface PuppetDbTimes {
  /** Connecting, the header, any pause (ms). */
  timeoutMs?: number
  /** The whole exchange (ms). */
  deadlineMs?: number
  maxBytes?: number
  maxRows?: number
}

/** Reads the puppetdb setting and its TLS files (null: no PuppetDB configured). `url` overrides the setting (--puppetdb). */
export async function puppetDbConfig(url?: string | null): Promise<PuppetDbConfig | null> {
  const {settingString} = await import('../config/settings.js')
  const chosen = url ?? (await settingString('puppetdb'))
  if (!chosen) return null
  const [ca, cert, key] = await Promise.all([settingString('puppetdb_ca'), settingString('puppetdb_cert'), settingString('puppetdb_key')])
  return {url: chosen, ca, cert, key}
}

/**
 * PuppetDB's HTTP API: the command API (to submit a run's report, facts and catalog) and
 * PQL queries (/pdb/query/v4). PuppetDB's own API is HTTPS with client certificates: the
 * puppetdb_ca, puppetdb_cert and puppetdb_key settings. Every answer is hostile input,
 * bounded in time and size (util/bounded-http.ts), its shape checked before use.
 */
export class PuppetDbClient {
  /** The URL as shown: without credentials. */
  readonly url: string
  private readonly base: URL
  private tls: ClientTls | undefined
  private readonly timeoutMs: number
  private readonly deadlineMs: number
  private readonly maxBytes: number
  private readonly maxRows: number

  constructor(
    private readonly config: PuppetDbConfig,
    times: PuppetDbTimes = {},
  ) {
    let base: URL
    try {
      base = new URL(config.url)
    } catch {
      throw new UsageError(`puppetdb ${JSON.stringify(terminalUrl(config.url))}: not a URL (https://puppetdb:8081)`)
    }

    if (base.protocol !== 'http:' && base.protocol !== 'https:') throw new UsageError(`puppetdb ${terminalUrl(config.url)}: http:// or https:// only`)
    if (base.username || base.password) throw new UsageError(`puppetdb ${terminalUrl(config.url)}: PuppetDB takes client certificates (puppetdb_cert, puppetdb_key), not a user and password in the URL`)
    if (!base.pathname.endsWith('/')) base.pathname += '/'
    this.base = base
    this.url = redactUrl(config.url)
    this.timeoutMs = times.timeoutMs ?? 10_000
    this.deadlineMs = times.deadlineMs ?? 60_000
    this.maxBytes = times.maxBytes ?? MAX_QUERY_BYTES
    this.maxRows = times.maxRows ?? MAX_QUERY_ROWS
  }

  /** The TLS files, read once (66/65 naming the setting when one cannot be read; 77 for a key others can read). */
  private async loadTls(): Promise<ClientTls | undefined> {
    if (this.tls !== undefined || this.base.protocol !== 'https:') return this.tls
    const read = async (path: string | null, key: string) => {
      if (path === null) return undefined
      // A private key others can read is no longer this node's alone: whoever reads it speaks to PuppetDB as this node.
      const inspect = (info: Stats) => {
        if (key !== 'puppetdb_key' || (info.mode & 0o077) === 0) return
        throw new UntrustedPathError(`puppetdb_key ${displayPath(path)}: mode ${(info.mode & 0o777).toString(8).padStart(4, '0')} lets others read it; a key others could read is not this node's alone`, [
          `chmod 600 ${displayPath(path)}, and make the node a new certificate if others may have read it`,
        ])
      }

      const bytes = await readBoundedFile(path, {maxBytes: 1024 * 1024, label: `${key} ${path}`, error: (message) => new InputError(message), inspect})
      return bytes.toString('utf8')
    }

    const [ca, cert, key] = await Promise.all([read(this.config.ca, 'puppetdb_ca'), read(this.config.cert, 'puppetdb_cert'), read(this.config.key, 'puppetdb_key')])
    if ((cert === undefined) !== (key === undefined)) throw new UsageError('puppetdb_cert and puppetdb_key go together: set both or neither')
    this.tls = {...(ca ? {ca} : {}), ...(cert ? {cert} : {}), ...(key ? {key} : {})}
    return this.tls
  }

  /**
   * Submits one command. Resolves once PuppetDB has accepted it (HTTP 200 and its uuid);
   * throws a FleetUnavailableError (69) naming the server for anything else. PuppetDB
   * queues commands: accepted is not yet stored, but PuppetDB keeps its queue on disk.
   */
  async submit(command: PuppetDbCommand, times: {timeoutMs: number; deadlineMs: number}, signal?: AbortSignal): Promise<string> {
    const target = new URL('pdb/cmd/v1', this.base)
    target.search = new URLSearchParams({
      command: command.command.replaceAll(' ', '_'),
      version: String(command.version),
      certname: command.certname,
      'producer-timestamp': command.producerTimestamp,
    }).toString()
    const body = JSON.stringify(command.payload)
    const answer = await this.exchange(target, {method: 'POST', body, headers: {'content-type': 'application/json; charset=utf-8', accept: 'application/json'}, ...times, maxBytes: MAX_ACK_BYTES, signal}, command.command)
    let uuid: unknown
    try {
      uuid = (JSON.parse(answer.toString('utf8')) as {uuid?: unknown}).uuid
    } catch {
      // Checked below.
    }

    if (typeof uuid !== 'string') throw this.unavailable(`${command.command}: not PuppetDB's answer (no command uuid)`)
    return uuid
  }

  /** A PQL query (or an AST one, as JSON text): its rows, each an object, checked by the caller. */
  async query(query: string, signal?: AbortSignal): Promise<Array<Record<string, unknown>>> {
    const target = new URL('pdb/query/v4', this.base)
    const answer = await this.exchange(target, {method: 'POST', body: JSON.stringify({query}), headers: {'content-type': 'application/json', accept: 'application/json'}, timeoutMs: this.timeoutMs, deadlineMs: this.deadlineMs, maxBytes: this.maxBytes, signal}, `query ${terminalText(query, 200)}`)
    let rows: unknown
    try {
      rows = JSON.parse(answer.toString('utf8'))
    } catch {
      throw this.unavailable(`query ${terminalText(query, 200)}: not PuppetDB's answer (not JSON)`)
    }

    if (!Array.isArray(rows) || rows.some((row) => row === null || typeof row !== 'object' || Array.isArray(row))) throw this.unavailable(`query ${terminalText(query, 200)}: not PuppetDB's answer (expected a list of objects)`)
    if (rows.length > this.maxRows) throw this.unavailable(`query ${terminalText(query, 200)}: more than ${this.maxRows} rows`)
    return rows as Array<Record<string, unknown>>
  }

  private async exchange(target: URL, request: Parameters<typeof boundedRequest>[1], what: string): Promise<Buffer> {
    const tls = await this.loadTls()
    let answer
    try {
      answer = await boundedRequest(target, {...request, tls})
    } catch (error) {
      const why = error instanceof BoundedHttpError ? error.message : (error as Error).message
      throw Object.assign(this.unavailable(`${what}: ${terminalText(why, 500)}`), {kind: error instanceof BoundedHttpError ? error.kind : 'network'})
    }

    if (answer.status !== 200) throw Object.assign(this.unavailable(`${what}: HTTP ${answer.status}: ${terminalText(answer.body.toString('utf8'), 300)}`), {httpStatus: answer.status})
    return answer.body
  }

  private unavailable(why: string): FleetUnavailableError {
    return new FleetUnavailableError(`puppetdb ${terminalUrl(this.url)}: ${why}`, ['check the puppetdb setting (and puppetdb_ca, puppetdb_cert, puppetdb_key) and that PuppetDB is up'])
  }
}
