import {EnvHttpProxyAgent, request} from 'undici'

import {FleetUnavailableError, UsageError} from '../errors.js'

/** One series of an instant vector: its labels and its value at the evaluation time. */
export interface PromSample {
  labels: Record<string, string>
  value: number
  /** The evaluation time, in ms. */
  at: number
}

export interface PrometheusOptions {
  /** Per request: connecting, waiting for the answer, reading it (ms). */
  timeoutMs?: number
  /** The largest answer read (bytes): a fleet's series, not an endless body. */
  maxBytes?: number
}

/**
 * Prometheus' HTTP API (`/api/v1/query`), instant queries only: what promote's health gate
 * and fleet status need. The API is one GET returning JSON, so this is undici's request and
 * a check of the answer's shape, not a client library (the npm ones wrap the same call in
 * axios and a query builder). Any fault reaching it or reading it is 69, naming the URL.
 */
export class PrometheusClient {
  private readonly base: URL
  private readonly timeoutMs: number
  private readonly maxBytes: number

  constructor(
    readonly url: string,
    options: PrometheusOptions = {},
  ) {
    let base: URL
    try {
      base = new URL(url)
    } catch {
      throw new UsageError(`--prometheus ${JSON.stringify(url)}: not a URL (http://host:9090)`)
    }

    if (base.protocol !== 'http:' && base.protocol !== 'https:') throw new UsageError(`--prometheus ${url}: http:// or https:// only`)
    if (!base.pathname.endsWith('/')) base.pathname += '/'
    this.base = base
    this.timeoutMs = options.timeoutMs ?? 30_000
    this.maxBytes = options.maxBytes ?? 256 * 1024 * 1024
  }

  /** An instant query: the series it returns (a vector), evaluated at `time` (ms) or now. */
  async query(promql: string, time?: number): Promise<PromSample[]> {
    return (await this.instant(promql, 'vector', time)).map((entry: any) => {
      const [at, value] = Array.isArray(entry?.value) ? entry.value : [Number.NaN, 'NaN']
      return {labels: labelsOf(entry), value: Number(value), at: Number(at) * 1000}
    })
  }

  /**
   * When each series a selector names was last scraped within `rangeSeconds`: an instant
   * query of the range (`selector[range]`), whose raw samples carry their own timestamps
   * (a function of a range, last_over_time included, answers at the evaluation time).
   */
  async lastSeen(selector: string, rangeSeconds: number): Promise<Array<{labels: Record<string, string>; at: number}>> {
    return (await this.instant(`${selector}[${Math.max(1, Math.round(rangeSeconds))}s]`, 'matrix')).map((entry: any) => {
      let last = Number.NaN
      for (const pair of Array.isArray(entry?.values) ? entry.values : []) {
        const at = Array.isArray(pair) ? Number(pair[0]) : Number.NaN
        if (Number.isFinite(at) && !(at <= last)) last = at
      }

      return {labels: labelsOf(entry), at: last * 1000}
    })
  }

  private async instant(promql: string, expected: 'vector' | 'matrix', time?: number): Promise<unknown[]> {
    const target = new URL('api/v1/query', this.base)
    const body = new URLSearchParams({query: promql, ...(time === undefined ? {} : {time: String(time / 1000)})})
    const unavailable = (why: string) => new FleetUnavailableError(`prometheus ${this.url}: ${why}`, ['check --prometheus and that Prometheus is up'])
    let text: string
    let status: number
    try {
      const response = await request(target, {
        method: 'POST',
        body: body.toString(),
        headers: {'content-type': 'application/x-www-form-urlencoded'},
        dispatcher: new EnvHttpProxyAgent({connectTimeout: this.timeoutMs}),
        headersTimeout: this.timeoutMs,
        bodyTimeout: this.timeoutMs,
      })
      status = response.statusCode
      const chunks: Buffer[] = []
      let size = 0
      for await (const chunk of response.body) {
        size += (chunk as Buffer).length
        if (size > this.maxBytes) {
          response.body.destroy()
          throw unavailable(`answer larger than ${this.maxBytes} bytes`)
        }

        chunks.push(chunk as Buffer)
      }

      text = Buffer.concat(chunks).toString('utf8')
    } catch (error) {
      if (error instanceof FleetUnavailableError) throw error
      throw unavailable((error as Error).message || String(error))
    }

    let doc: any
    try {
      doc = JSON.parse(text)
    } catch {
      throw unavailable(`HTTP ${status}: not Prometheus' API (no JSON answer at ${target.href})`)
    }

    if (doc?.status !== 'success') throw unavailable(`HTTP ${status}: ${doc?.errorType ?? 'error'}: ${doc?.error ?? 'no answer'} (query ${promql})`)
    if (doc.data?.resultType !== expected || !Array.isArray(doc.data.result)) throw unavailable(`query ${promql}: expected ${expected === 'vector' ? 'an instant vector' : 'a range vector'}, got ${doc.data?.resultType}`)
    return doc.data.result
  }
}

function labelsOf(entry: any): Record<string, string> {
  const labels = entry && typeof entry.metric === 'object' && entry.metric !== null ? entry.metric : {}
  return Object.fromEntries(Object.entries(labels).map(([k, v]) => [k, String(v)]))
}

/** A PromQL string literal matching exactly the `values` (and nothing else) as a regular expression (`=~`): RE2's metacharacters escaped, then the string's. */
export function promRegexLiteral(values: string[]): string {
  const alternatives = values.map((value) => value.replace(/[\\.+*?()|[\]{}^$]/g, '\\$&')).join('|')
  return JSON.stringify(alternatives)
}
