import {EnvHttpProxyAgent, request} from 'undici'

import {FleetUnavailableError, UsageError} from '../errors.js'
import {JsonReader, JsonStreamError, MoreBytesNeeded} from '../util/json-stream.js'
import {meterRate} from '../util/rate-floor.js'
import {redactUrl, terminalText, terminalUrl} from '../util/terminal-text.js'
import {timerDelay} from '../util/timer-delay.js'
import {STRAY_PERCENT, urlCredentials} from '../util/url-credentials.js'

/** One series of an instant vector: its labels and its value at the evaluation time. */
export interface PromSample {
  labels: Record<string, string>
  value: number
  /** The value as Prometheus wrote it (`"1"`, `"NaN"`, `"1e20"`), for a message naming it. */
  raw: string
  /** The evaluation time, in ms. */
  at: number
}

/**
 * What the node metrics of the largest fleet this is built for can fill, with room: 100,000
 * nodes of about 15 series each, twice over. An answer with more series is 69, naming the
 * query; the series are handed on one at a time and never held together.
 */
export const MAX_SERIES = 2 * 100_000 * 15
/** The largest answer read: MAX_SERIES series of 256 bytes each (a node's series are 150-350). */
export const MAX_ANSWER_BYTES = MAX_SERIES * 256
/** The most text one series (or the error text) may take: a series is a few hundred bytes. */
export const MAX_SERIES_CHARS = 1024 * 1024
/** The default time a whole answer has (a 100,000-node fleet's is some 400 MB). */
export const DEFAULT_DEADLINE_MS = 5 * 60_000

export interface PrometheusOptions {
  /** Per request: connecting, waiting for the header, any pause in the body; and the window the rate floor is measured over (ms). */
  timeoutMs?: number
  /** The whole answer, from connecting to its last byte (ms). */
  deadlineMs?: number
  /** The largest answer read (bytes). */
  maxBytes?: number
  /** The most series one query may answer. */
  maxSeries?: number
}

/** A series refused by its reader: why (the client names the query, the series and its value). */
export type SeriesCheck = (sample: PromSample) => string | void

/** The time of a sample, in seconds since 1970: Date's range, and not before it. */
const MAX_SECONDS = 8.64e12
const PROM_FLOAT = /^[+-]?(?:Inf|NaN|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)$/

/**
 * Prometheus' HTTP API (`/api/v1/query`), instant queries only: what promote's health gate
 * and fleet status need. The API is one POST returning JSON, so this is undici's request and
 * a walk of the answer, not a client library (the npm ones wrap the same call in axios and a
 * query builder, and parse the answer whole). The answer is hostile input, as a repository's
 * is to fetch: bounded in time (a pause, the rate floor, a deadline for the whole), in size
 * (MAX_ANSWER_BYTES, MAX_SERIES), walked as it arrives so that memory holds the series the
 * caller keeps, not the answer; every series' shape, time and value checked. Any fault
 * reaching it or reading it is 69, naming the URL (without its credentials) and the query.
 * Redirects are not followed (an answer that is not the API's JSON). Credentials in the URL
 * (`http://user:pass@host`) are sent as HTTP basic authentication and never shown.
 */
export class PrometheusClient {
  /** The URL as shown: without credentials. */
  readonly url: string
  private readonly base: URL
  private readonly authorization: string | null
  private readonly timeoutMs: number
  private readonly deadlineMs: number
  private readonly maxBytes: number
  private readonly maxSeries: number

  constructor(url: string, options: PrometheusOptions = {}) {
    let base: URL
    try {
      base = new URL(url)
    } catch {
      throw new UsageError(`--prometheus ${JSON.stringify(terminalUrl(url))}: not a URL (http://host:9090)`)
    }

    if (base.protocol !== 'http:' && base.protocol !== 'https:') throw new UsageError(`--prometheus ${terminalUrl(url)}: http:// or https:// only`)
    const credentials = urlCredentials(base)
    if (credentials === undefined) throw new UsageError(`--prometheus ${terminalUrl(url)}: ${STRAY_PERCENT}`)
    this.authorization = credentials ? `Basic ${Buffer.from(`${credentials.user}:${credentials.password}`).toString('base64')}` : null
    base.username = ''
    base.password = ''
    if (!base.pathname.endsWith('/')) base.pathname += '/'
    this.base = base
    this.url = redactUrl(url)
    // Held to what a timer can keep (--prometheus-timeout 30d would otherwise fire at once).
    this.timeoutMs = timerDelay(options.timeoutMs ?? 30_000)
    this.deadlineMs = timerDelay(options.deadlineMs ?? DEFAULT_DEADLINE_MS)
    this.maxBytes = options.maxBytes ?? MAX_ANSWER_BYTES
    this.maxSeries = options.maxSeries ?? MAX_SERIES
  }

  /**
   * An instant query, evaluated at `time` (ms) or now: each series of the vector it returns
   * is handed to `each` as it is read (a reason it returns refuses the answer: 69). Returns
   * the evaluation time (ms), or null when no series came.
   */
  async query(promql: string, each: SeriesCheck, time?: number): Promise<number | null> {
    let at: number | null = null
    await this.instant(promql, 'vector', time, (entry, fail) => {
      const labels = labelsOf(entry, fail)
      const [when, raw] = pairOf(entry.value, labels, fail)
      const sample = {labels, value: Number(raw.replace(/^([+-]?)Inf$/, '$1Infinity')), raw, at: when * 1000}
      at ??= sample.at
      const why = each(sample)
      if (why) fail(`${describeSeries(labels)}: value ${JSON.stringify(terminalText(raw, 40))} ${why}`)
    })
    return at
  }

  /**
   * When each series a selector names was last scraped within `rangeSeconds`: an instant
   * query of the range (`selector[range]`), whose raw samples carry their own timestamps
   * (a function of a range, last_over_time included, answers at the evaluation time).
   */
  async lastSeen(selector: string, rangeSeconds: number, each: (series: {labels: Record<string, string>; at: number}) => void): Promise<void> {
    await this.instant(`${selector}[${Math.max(1, Math.round(rangeSeconds))}s]`, 'matrix', undefined, (entry, fail) => {
      const labels = labelsOf(entry, fail)
      if (!Array.isArray(entry.values)) fail(`${describeSeries(labels)}: no values`)
      let last = Number.NEGATIVE_INFINITY
      for (const pair of entry.values as unknown[]) last = Math.max(last, pairOf(pair, labels, fail)[0])
      each({labels, at: last * 1000})
    })
  }

  /** One query: its answer walked as it arrives, each entry of its result handed to `each`. */
  private async instant(promql: string, expected: 'vector' | 'matrix', time: number | undefined, each: (entry: any, fail: (why: string) => never) => void): Promise<void> {
    const target = new URL('api/v1/query', this.base)
    const body = new URLSearchParams({query: promql, ...(time === undefined ? {} : {time: String(time / 1000)})})
    const unavailable = (why: string) => new FleetUnavailableError(`prometheus ${terminalUrl(this.url)}: ${why}`, ['check --prometheus and that Prometheus is up'])
    const query = `query ${terminalText(promql, 200)}`
    const fail = (why: string): never => {
      throw unavailable(`${query}: ${why}`)
    }

    const walk = new AnswerWalk(expected, this.maxSeries, (entry) => each(entry, fail), fail)
    const deadline = new AbortController()
    const timer = setTimeout(() => deadline.abort(), this.deadlineMs)
    const dispatcher = new EnvHttpProxyAgent({connectTimeout: this.timeoutMs})
    let status = 0
    try {
      const response = await request(target, {
        method: 'POST',
        body: body.toString(),
        headers: {'content-type': 'application/x-www-form-urlencoded', ...(this.authorization ? {authorization: this.authorization} : {})},
        dispatcher,
        headersTimeout: this.timeoutMs,
        bodyTimeout: this.timeoutMs,
        signal: deadline.signal,
      })
      status = response.statusCode
      let size = 0
      for await (const chunk of meterRate(response.body, 'the answer', this.timeoutMs)) {
        size += (chunk as Buffer).length
        if (size > this.maxBytes) fail(`answer larger than ${this.maxBytes} bytes`)
        walk.push(chunk as Buffer)
      }

      walk.end()
    } catch (error) {
      if (error instanceof FleetUnavailableError) throw error
      if (deadline.signal.aborted) throw unavailable(`${query}: no whole answer within ${this.deadlineMs / 1000} s (--prometheus-timeout)`)
      if (error instanceof JsonStreamError) throw unavailable(`HTTP ${status}: not Prometheus' API (no JSON answer at ${terminalUrl(target.href)}: ${terminalText(error.message, 200)})`)
      throw unavailable(`${query}: ${terminalText((error as Error).message || String(error), 500)}`)
    } finally {
      clearTimeout(timer)
      void dispatcher.close().catch(() => {})
    }

    if (walk.status !== 'success') {
      // The error text as written when it is a string; anything else shown as JSON (String() of an array 100,000 deep overflows the stack).
      const said = (value: unknown, otherwise: string) => (value === undefined ? otherwise : typeof value === 'string' ? value : shown(value))
      const detail = walk.status === undefined ? "not Prometheus' API (no status)" : `${terminalText(said(walk.errorType, 'error'), 100)}: ${terminalText(said(walk.error, 'no answer'), 500)}`
      throw unavailable(`HTTP ${status}: ${detail} (${query})`)
    }

    if (walk.resultType !== expected || !walk.sawResult) fail(`expected ${expected === 'vector' ? 'an instant vector' : 'a range vector'}, got ${terminalText(String(walk.resultType), 40)}`)
  }
}

/**
 * The walk of one answer, `{"status": ..., "data": {"resultType": ..., "result": [...]}}`
 * with its keys in any order, fed bytes as they arrive: each step runs when the text it
 * needs is there (JsonReader.attempt), and the result's entries go to `each` a batch at a
 * time. What it holds is one step's text, at most MAX_SERIES_CHARS.
 */
class AnswerWalk {
  status?: unknown
  errorType?: unknown
  error?: unknown
  resultType?: unknown
  sawResult = false
  private readonly queue: Buffer[] = []
  private ended = false
  private readonly reader: JsonReader
  private where: 'start' | 'top' | 'data' | 'result' | 'done' = 'start'
  private series = 0
  /** Bytes to wait for before the next try, after a step could not finish. */
  private waitFor = 0

  constructor(
    private readonly expected: 'vector' | 'matrix',
    private readonly maxSeries: number,
    private readonly each: (entry: any) => void,
    private readonly fail: (why: string) => never,
  ) {
    this.reader = new JsonReader((buffer) => {
      const head = this.queue[0]
      if (head === undefined) {
        if (this.ended) return 0
        throw new MoreBytesNeeded()
      }

      const count = head.copy(buffer)
      if (count === head.length) this.queue.shift()
      else this.queue[0] = head.subarray(count)
      return count
    })
  }

  push(chunk: Buffer): void {
    this.queue.push(chunk)
    this.waitFor -= chunk.length
    if (this.waitFor <= 0) this.run()
  }

  end(): void {
    this.ended = true
    this.run()
    if (this.where !== 'done') throw new JsonStreamError('the answer ends early')
  }

  private run(): void {
    const tooLarge = () => this.fail(`one series (or the error text) of more than ${MAX_SERIES_CHARS} characters`)
    while (this.where !== 'done') {
      const from = this.reader.position
      if (this.reader.attempt(() => this.step()) !== null) {
        // A step takes one value, or a batch of series of some 64 KiB.
        if (this.reader.position - from > MAX_SERIES_CHARS) tooLarge()
      } else {
        const pending = this.reader.pending
        if (pending > MAX_SERIES_CHARS) tooLarge()
        // Try again once as much again came (at least 64 KiB): a step rescans what it holds, so retries stay linear.
        this.waitFor = Math.max(64 * 1024, pending)
        return
      }
    }
  }

  private step(): void {
    const reader = this.reader
    switch (this.where) {
      case 'start': {
        reader.enterObject()
        this.where = 'top'
        return
      }

      case 'top': {
        const key = reader.key()
        if (key === null) {
          reader.finish()
          this.where = 'done'
        } else if (key === 'data') {
          reader.enterObject()
          this.where = 'data'
        } else {
          const value = reader.value()
          if (key === 'status') this.status = value
          if (key === 'errorType') this.errorType = value
          if (key === 'error') this.error = value
        }

        return
      }

      case 'data': {
        const key = reader.key()
        if (key === null) this.where = 'top'
        else if (key === 'result') {
          reader.enterArray()
          this.where = 'result'
          this.sawResult = true
        } else {
          const value = reader.value()
          if (key === 'resultType') {
            this.resultType = value
            if (value !== this.expected) this.fail(`expected ${this.expected === 'vector' ? 'an instant vector' : 'a range vector'}, got ${terminalText(String(value), 40)}`)
          }
        }

        return
      }

      case 'result': {
        const entries = reader.elements()
        if (entries.length === 0) {
          this.where = 'data'
          return
        }

        this.series += entries.length
        if (this.series > this.maxSeries) this.fail(`more than ${this.maxSeries} series in the answer`)
        for (const entry of entries) {
          if (entry === null || typeof entry !== 'object' || Array.isArray(entry)) this.fail(`a series that is not an object: ${terminalText(shown(entry), 80)}`)
          this.each(entry)
        }
      }
    }
  }
}

/**
 * A piece of the answer as JSON, for a message (cut and made safe by the caller): a value
 * nested too deep for JSON.stringify (an array of arrays 100,000 deep, which JSON.parse
 * reads) is named as such, not as the engine's stack overflow.
 */
function shown(value: unknown): string {
  try {
    return JSON.stringify(value) ?? String(value)
  } catch {
    return '(nested too deep to show)'
  }
}

/** A series' labels: an object of strings. */
function labelsOf(entry: any, fail: (why: string) => never): Record<string, string> {
  const metric = entry.metric
  if (metric === null || typeof metric !== 'object' || Array.isArray(metric)) fail(`a series without its labels: ${terminalText(shown(entry), 120)}`)
  for (const [name, value] of Object.entries(metric)) {
    if (typeof value !== 'string') fail(`${describeSeries(Object.fromEntries(Object.entries(metric).filter(([, v]) => typeof v === 'string')) as Record<string, string>)}: label ${terminalText(name, 80)} is ${terminalText(shown(value), 40)}, not a string`)
  }

  return metric as Record<string, string>
}

/** A sample `[time, "value"]`: a time in seconds since 1970 (Date's range) and a Prometheus float. */
function pairOf(pair: unknown, labels: Record<string, string>, fail: (why: string) => never): [number, string] {
  const [when, raw] = Array.isArray(pair) && pair.length === 2 ? pair : [undefined, undefined]
    if (typeof when !== 'number' || !Number.isFinite(when) || when < 0 || when > MAX_SECONDS) fail(`${describeSeries(labels)}: sample ${terminalText(shown(pair), 80)}: its time is not a time (seconds since 1970)`)
  if (typeof raw !== 'string' || !PROM_FLOAT.test(raw)) fail(`${describeSeries(labels)}: sample ${terminalText(shown(pair), 80)}: its value is not a number`)
  return [when, raw]
}

/** A series as PromQL writes it, each label cut and made safe for a terminal: `localpuppet_x{instance="web1:9100", node="web1"}`. */
export function describeSeries(labels: Record<string, string>): string {
  const {__name__: name, ...rest} = labels
  const shown = ['node', 'instance', 'job'].filter((key) => typeof rest[key] === 'string')
  return `series ${terminalText(name ?? '', 100)}{${shown.map((key) => `${key}="${terminalText(rest[key], 100)}"`).join(', ')}}`
}

/** A PromQL string literal matching exactly the `values` (and nothing else) as a regular expression (`=~`): RE2's metacharacters escaped, then the string's. */
export function promRegexLiteral(values: string[]): string {
  const alternatives = values.map((value) => value.replace(/[\\.+*?()|[\]{}^$]/g, '\\$&')).join('|')
  return JSON.stringify(alternatives)
}
