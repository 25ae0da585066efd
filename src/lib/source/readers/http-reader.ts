import type {Agent, ClientRequest, IncomingMessage} from 'node:http'
import {createRequire} from 'node:module'
import type {Readable} from 'node:stream'

import type {Dispatcher} from 'undici'

import {LocalpuppetError, ReleaseError, RepositoryUnavailableError, UsageError} from '../../errors.js'
import {type ConditionalRead, type Transport, type Validators, writeChecked} from './reader.js'
import {ACCEPT_ENCODING, readDecoded} from '../../conditional/content-encoding.js'
import {meterRate} from '../../util/rate-floor.js'
import {redactUrl, terminalUrl} from '../../util/terminal-text.js'
import {timerDelay} from '../../util/timer-delay.js'
import {STRAY_PERCENT, urlCredentials} from '../../util/url-credentials.js'

export interface HttpOptions {
  /** Per request: connecting, waiting for headers, and any pause in the body (ms). */
  timeoutMs?: number
  /** Attempts for a transient fault (refused, reset, timeout, 5xx, 429), the first included. */
  attempts?: number
  /** The first backoff (ms); it doubles, with jitter, up to maxBackoffMs. */
  backoffMs?: number
  maxBackoffMs?: number
  env?: NodeJS.ProcessEnv
}


/** Redirects followed per request; more is a loop. */
const MAX_REDIRECTS = 5
const REDIRECTS = new Set([301, 302, 303, 307, 308])
/** Network errors worth another attempt. */
const TRANSIENT_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'UND_ERR_SOCKET',
  'UND_ERR_CLOSED',
  'UND_ERR_ABORTED',
  // The connection closed before the bytes its Content-Length announced: cut short, as a reset is.
  'UND_ERR_RES_CONTENT_LENGTH_MISMATCH',
  'LOCALPUPPET_TOO_SLOW',
  // node:http's requests (see NodeHttp): the same three bounds as undici's.
  'LOCALPUPPET_CONNECT_TIMEOUT',
  'LOCALPUPPET_HEADERS_TIMEOUT',
  'LOCALPUPPET_BODY_TIMEOUT',
])

/** Errors from reading a body that are the network's (69), not a bug: undici's, and node:http's parser and stream ends. */
const NETWORK_CODE = /^(UND_ERR_|HPE_|ERR_STREAM_PREMATURE_CLOSE$|ECONNABORTED$)/

/** One HTTP exchange's answer, whichever client made it. */
interface Answer {
  status: number
  headers: Record<string, string | string[] | undefined>
  body: Readable
}

/** A fault another attempt may cure; carries what to say if none does. */
class TransientError extends Error {
  constructor(
    message: string,
    readonly retryAfterMs: number | null = null,
  ) {
    super(message)
  }
}

/**
 * A repository served over HTTP(S) by any static web server. Proxies come from
 * HTTPS_PROXY/HTTP_PROXY/NO_PROXY. Transient faults are retried with backoff a bounded
 * number of times, then reported as unavailable (69); redirects are followed a few times
 * and never from https to http (65).
 *
 * Requests go out through Node's own node:http/node:https, which cost nothing to load, so a
 * fetch that finds nothing new in the index stays light; undici (~0.1 s to load: see
 * bin/build.js) is loaded only when a proxy variable applies to the scheme, for its proxy
 * agent (NO_PROXY is then undici's to apply). Both clients are held to the same bounds:
 * connecting, waiting for the whole header, each pause in the body (--timeout each), the
 * slowest body believed (MIN_BYTES_PER_SECOND), a body cut short of its Content-Length.
 */
export class HttpTransport implements Transport {
  readonly kind: 'https' | 'http'
  readonly label: string
  private readonly base: URL
  private readonly env: NodeJS.ProcessEnv
  private readonly timeoutMs: number
  private readonly attempts: number
  private readonly backoffMs: number
  private readonly maxBackoffMs: number
  private nodeHttp?: NodeHttp
  private proxied?: Dispatcher
  /** Bytes of the bodies received so far, as they came over the wire (compressed, when they were). */
  bytesRead = 0

  constructor(url: string, options: HttpOptions = {}) {
    try {
      // The path gets its closing slash, so files resolve beneath it; a query (a token a
      // server wants on every request) and no fragment are kept for every file's request.
      const base = new URL(url)
      if (!base.pathname.endsWith('/')) base.pathname += '/'
      base.hash = ''
      this.base = base
    } catch {
      throw new UsageError(`source ${terminalUrl(url)}: not a URL (https://host/path, with any / or @ in a user or password written %2F, %40)`)
    }

    if (urlCredentials(this.base) === undefined) throw new UsageError(`source ${terminalUrl(url)}: ${STRAY_PERCENT}`)

    this.kind = this.base.protocol === 'https:' ? 'https' : 'http'
    // Credentials in the URL (https://user:pass@host/) authenticate its requests and are in no message, record or JSON.
    this.label = redactUrl(this.base.href)
    // Every timer below (node:http's, undici's, the rate floor's window) is held to what a timer can keep.
    this.timeoutMs = timerDelay(options.timeoutMs ?? 30_000)
    this.attempts = Math.max(1, options.attempts ?? 4)
    this.backoffMs = options.backoffMs ?? 250
    this.maxBackoffMs = options.maxBackoffMs ?? 5000
    this.env = options.env ?? process.env
  }

  /** A file's URL as shown: without the source's credentials. */
  locate(path: string): string {
    return redactUrl(this.address(path))
  }

  /** A file's URL as requested: with them. */
  private address(path: string): string {
    const url = new URL(path, this.base)
    if (this.base.search !== '') url.search = this.base.search
    return url.href
  }

  async read(path: string, maxBytes: number): Promise<Buffer | null> {
    const answer = await this.readConditional(path, maxBytes, null)
    return answer === null || answer.status === 'unchanged' ? null : answer.bytes
  }

  /**
   * A small file read whole, compressed in transit when the server offers it (bounded as
   * it is decoded: readDecoded), and conditionally when `kept` holds the validators of the
   * copy the caller keeps: `unchanged` on a 304. A 304 to a request that named no copy is
   * the server's lie (65): this node holds nothing it could stand for.
   */
  async readConditional(path: string, maxBytes: number, kept: Validators | null): Promise<ConditionalRead | null> {
    const headers: Record<string, string> = {'accept-encoding': ACCEPT_ENCODING}
    if (kept?.etag) headers['if-none-match'] = kept.etag
    if (kept?.lastModified) headers['if-modified-since'] = kept.lastModified
    return this.withRetries(path, async (url) => {
      const answer = await this.get(url, true, headers)
      if (answer === null || answer === 'not modified') return answer === null ? null : {status: 'unchanged' as const}
      const bytes = await readDecoded(answer.body, answer.headers['content-encoding'], redactUrl(url), maxBytes).catch((error: unknown) => {
        throw transient(error) ?? unavailable(error, redactUrl(url))
      })
      return {status: 'read' as const, bytes, validators: validatorsOf(answer.headers)}
    })
  }

  async download(path: string, to: string, expected: {size: number; sha256: string}, onProgress?: (bytes: number) => void): Promise<void> {
    await this.withRetries(path, async (url) => {
      const {body} = (await this.get(url, false)) as Answer
      await writeChecked(body, to, redactUrl(url), expected, onProgress).catch((error: unknown) => {
        throw transient(error) ?? unavailable(error, redactUrl(url))
      })
    })
  }

  async close(): Promise<void> {
    this.nodeHttp?.close()
    await this.proxied?.close()
  }

  /**
   * Whether a proxy variable applies to a URL's scheme, read as undici's EnvHttpProxyAgent
   * reads them (the env given, then this process's): http_proxy/HTTP_PROXY for http, and
   * for https https_proxy/HTTPS_PROXY, else the http ones. An empty value is no proxy.
   */
  private proxyFor(url: URL): {httpProxy?: string; httpsProxy?: string} | null {
    const env = this.env
    const httpProxy = env.http_proxy ?? env.HTTP_PROXY
    const httpsProxy = env.https_proxy ?? env.HTTPS_PROXY ?? env.http_proxy ?? env.HTTP_PROXY
    const forHttp = httpProxy ?? process.env.http_proxy ?? process.env.HTTP_PROXY
    const forHttps = (httpsProxy ?? process.env.https_proxy ?? process.env.HTTPS_PROXY) || forHttp
    return (url.protocol === 'https:' ? forHttps : forHttp) ? {httpProxy, httpsProxy} : null
  }

  /** One GET, no redirect followed: through undici's proxy agent when a proxy applies, else node:http(s). */
  private async exchange(url: URL, headers: Record<string, string>): Promise<Answer> {
    const proxy = this.proxyFor(url)
    if (proxy === null) {
      this.nodeHttp ??= new NodeHttp(this.timeoutMs)
      return this.nodeHttp.get(url, headers)
    }

    const {proxyAgent, proxyGet} = await import('./proxy-request.js')
    this.proxied ??= proxyAgent({...proxy, noProxy: this.env.no_proxy ?? this.env.NO_PROXY, timeoutMs: this.timeoutMs})
    return proxyGet(url, this.proxied, this.timeoutMs, headers)
  }

  private async withRetries<T>(path: string, attempt: (url: string) => Promise<T>): Promise<T> {
    const url = this.address(path)
    let last: TransientError | null = null
    for (let n = 0; n < this.attempts; n++) {
      if (last) await sleep(last.retryAfterMs ?? Math.min(this.maxBackoffMs, this.backoffMs * 2 ** (n - 1)) * (0.5 + Math.random() / 2))
      try {
        return await attempt(url)
      } catch (error) {
        if (!(error instanceof TransientError)) throw error
        last = error
      }
    }

    throw new RepositoryUnavailableError(`repository ${this.label}: ${last!.message} (${this.attempts} attempt${this.attempts === 1 ? '' : 's'})`, [
      'check the source URL, the network and the web server; the node keeps what it has',
    ])
  }

  /** A 200's answer, following redirects; null for a 404 when the file is optional; `not modified` for a 304 to a conditional request. */
  private async get(start: string, optional: boolean, headers: Record<string, string> = {}): Promise<Answer | 'not modified' | null> {
    let url = new URL(start)
    for (let hop = 0; ; hop++) {
      const shown = redactUrl(url.href)
      let response: Answer
      try {
        response = await this.exchange(url, headers)
      } catch (error) {
        throw transient(error) ?? tlsMistake(error, url, hop === 0 ? this.label : shown) ?? new RepositoryUnavailableError(`${shown}: ${(error as Error).message}`)
      }

      const status = response.status
      if (status === 200) {
        response.body.on('data', (chunk: Buffer) => {
          this.bytesRead += chunk.length
        })
        return {...response, body: meterRate(response.body, shown, this.timeoutMs)}
      }

      await dump(response.body)
      if (status === 304) {
        if (headers['if-none-match'] || headers['if-modified-since']) return 'not modified'
        throw new ReleaseError(`${shown}: 304 Not Modified, though this node named no copy it holds; refused (a server that answers 304 to anything would freeze it)`)
      }

      if (REDIRECTS.has(status)) {
        const location = response.headers.location
        if (typeof location !== 'string') throw new RepositoryUnavailableError(`${shown}: redirect ${status} without a Location`)
        if (hop >= MAX_REDIRECTS) throw new RepositoryUnavailableError(`${redactUrl(start)}: more than ${MAX_REDIRECTS} redirects (a redirect loop?)`)
        const next = new URL(location, url)
        if (url.protocol === 'https:' && next.protocol !== 'https:') throw new ReleaseError(`${shown}: redirected to ${redactUrl(next.href)}; refused (never from https to plain http)`)
        if (next.protocol !== 'https:' && next.protocol !== 'http:') throw new ReleaseError(`${shown}: redirected to ${redactUrl(next.href)}; refused`)
        url = next
        continue
      }

      if (status === 404 || status === 410) {
        if (optional) return null
        throw new RepositoryUnavailableError(`${shown}: ${status} not found (the repository's index names it)`, ['the repository is incomplete or being synced; try again later'])
      }

      if (status === 429 || status >= 500) throw new TransientError(`${shown}: HTTP ${status}`, retryAfter(response.headers['retry-after']))
      throw new RepositoryUnavailableError(`${shown}: HTTP ${status}`)
    }
  }
}

/**
 * GETs over Node's own node:http and node:https (no proxy), with undici's bounds: the
 * connection within `timeoutMs`, the whole header within `timeoutMs` more (a header
 * dripped a byte at a time does not reset it), and no pause in the body longer than
 * `timeoutMs`. A body the connection ends short of its Content-Length fails with
 * ECONNRESET (node:http's "aborted"), as undici's fails with a length mismatch. Keeps the
 * connection for the next request (the index's signature, an archive).
 */
class NodeHttp {
  private readonly agents = new Map<string, Agent>()

  constructor(private readonly timeoutMs: number) {}

  async get(url: URL, headers: Record<string, string>): Promise<Answer> {
    // Required when first used (node:https loads tls), not imported: the bundle is CommonJS, where import() of a built-in is not available.
    const client: typeof import('node:http') = url.protocol === 'https:' ? lazyRequire('node:https') : lazyRequire('node:http')
    let agent = this.agents.get(url.protocol)
    if (agent === undefined) {
      agent = new client.Agent({keepAlive: true})
      this.agents.set(url.protocol, agent)
    }

    return new Promise<Answer>((resolve, reject) => {
      const request = client.request(url, {method: 'GET', agent, headers})
      const fail = (code: string, what: string) => request.destroy(Object.assign(new Error(`${what} timed out after ${this.timeoutMs} ms`), {code}))
      let timer = setTimeout(() => fail('LOCALPUPPET_CONNECT_TIMEOUT', 'connecting'), this.timeoutMs)
      const waitForHeaders = () => {
        clearTimeout(timer)
        timer = setTimeout(() => fail('LOCALPUPPET_HEADERS_TIMEOUT', 'waiting for the response header'), this.timeoutMs)
      }

      request.once('socket', (socket) => {
        if (!socket.connecting) return waitForHeaders()
        socket.once(url.protocol === 'https:' ? 'secureConnect' : 'connect', waitForHeaders)
      })
      // `on`, not `once`: a socket's fault after the response is emitted here too (the body gets it as well).
      request.on('error', (error) => {
        clearTimeout(timer)
        reject(error)
      })
      request.once('response', (response: IncomingMessage) => {
        clearTimeout(timer)
        idleBound(request, response, this.timeoutMs)
        resolve({status: response.statusCode ?? 0, headers: response.headers, body: response})
      })
      request.end()
    })
  }

  close(): void {
    for (const agent of this.agents.values()) agent.destroy()
  }
}

const lazyRequire = createRequire(import.meta.url)

/** Ends a response (LOCALPUPPET_BODY_TIMEOUT) when its connection is idle for `timeoutMs`; the connection then goes too. */
function idleBound(request: ClientRequest, response: IncomingMessage, timeoutMs: number): void {
  const socket = response.socket
  const idle = () => {
    response.destroy(Object.assign(new Error(`no data for ${timeoutMs} ms`), {code: 'LOCALPUPPET_BODY_TIMEOUT'}))
    request.destroy()
  }

  socket.setTimeout(timeoutMs)
  socket.on('timeout', idle)
  response.once('close', () => {
    socket.off('timeout', idle)
    socket.setTimeout(0)
  })
}

/** Reads and discards a body that is not wanted (a redirect's, an error page's); its faults do not matter. */
async function dump(body: Readable): Promise<void> {
  const dumpable = body as Readable & {dump?: () => Promise<void>}
  if (typeof dumpable.dump === 'function') return dumpable.dump().catch(() => {})
  // Bounded like undici's dump: a long error page is cut, not read to its end.
  let bytes = 0
  await new Promise<void>((resolve) => {
    body.on('data', (chunk: Buffer) => {
      bytes += chunk.length
      if (bytes > 128 * 1024) body.destroy()
    })
    body.once('end', resolve)
    body.once('close', resolve)
    body.once('error', () => resolve())
  })
}

function transient(error: unknown): TransientError | null {
  if (error instanceof LocalpuppetError || error instanceof TransientError) return error instanceof TransientError ? error : null
  const code = (error as {code?: string})?.code
  if (code && TRANSIENT_CODES.has(code)) return new TransientError(describeNetworkError(code, error as Error))
  return null
}

/**
 * What the network did that is neither transient nor the repository's lie: unavailable
 * (69), in one line, never an internal error (70).
 */
function unavailable(error: unknown, url: string): unknown {
  if (error instanceof LocalpuppetError || error instanceof TransientError) return error
  const code = (error as {code?: string})?.code
  if (typeof code === 'string' && NETWORK_CODE.test(code)) return new RepositoryUnavailableError(`${url}: ${(error as Error).message}`)
  return error
}

/**
 * TLS refused for a reason that is the source's, not the network's: one line naming the
 * source and the likely fix, never OpenSSL's own (`...:ssl3_get_record:wrong version number:...`).
 */
function tlsMistake(error: unknown, url: URL, source: string): RepositoryUnavailableError | null {
  const {code, reason} = tlsFault(error) ?? {}
  if (code === undefined) return null
  // What an https client reads from a plain-http port: an HTTP answer where a TLS record should be.
  if (code === 'ERR_SSL_WRONG_VERSION_NUMBER' || code === 'ERR_SSL_PACKET_LENGTH_TOO_LONG' || code === 'ERR_SSL_HTTP_REQUEST') {
    const plain = source.replace(/^https:/i, 'http:')
    return new RepositoryUnavailableError(`source ${source}: ${url.host} answers plain HTTP, not HTTPS, on that port: did you mean ${plain} (with a trusted key, or --insecure)?`)
  }

  return new RepositoryUnavailableError(`source ${source}: TLS with ${url.host} failed: ${reason ?? code}`)
}

/**
 * OpenSSL's code and reason for a TLS failure: as undici's socket reports it (ERR_SSL_*,
 * with `reason`), or as node:https does when the failure comes on a write (EPROTO, with
 * OpenSSL's `...:SSL routines:func:reason:file:line:` in the message). Null for anything else.
 */
function tlsFault(error: unknown): {code: string; reason?: string} | null {
  const {code, reason, message} = error as {code?: string; reason?: string; message?: string}
  if (typeof code === 'string' && code.startsWith('ERR_SSL_')) return {code, reason}
  const openssl = code === 'EPROTO' && typeof message === 'string' ? /SSL routines:[^:]*:([^:]+):/.exec(message) : null
  return openssl ? {code: `ERR_SSL_${openssl[1].toUpperCase().replaceAll(' ', '_')}`, reason: openssl[1]} : null
}

function describeNetworkError(code: string, error: Error): string {
  if (code === 'ECONNREFUSED') return 'connection refused'
  if (code === 'LOCALPUPPET_TOO_SLOW') return error.message
  if (code === 'UND_ERR_RES_CONTENT_LENGTH_MISMATCH') return 'connection reset or closed early (fewer bytes than its Content-Length)'
  if (code === 'ECONNRESET' || code === 'EPIPE' || code === 'UND_ERR_SOCKET' || code === 'UND_ERR_CLOSED') return `connection reset or closed early (${error.message})`
  if (code.includes('TIMEOUT') || code === 'ETIMEDOUT') return 'timed out'
  return `${code} (${error.message})`
}

/** The validators a conditional request can send back: a strong or weak ETag, a Last-Modified, each only when it is one short printable line. */
function validatorsOf(headers: Answer['headers']): Validators {
  const one = (value: string | string[] | undefined) => (typeof value === 'string' && value.length <= 256 && /^[\x20-\x7e]+$/.test(value) ? value : undefined)
  const etag = one(headers.etag)
  const lastModified = one(headers['last-modified'])
  return {...(etag ? {etag} : {}), ...(lastModified ? {lastModified} : {})}
}

/** Retry-After in seconds (a date is ignored), capped so a server cannot park the node. */
function retryAfter(header: string | string[] | undefined): number | null {
  const seconds = Number(Array.isArray(header) ? header[0] : header)
  return Number.isFinite(seconds) && seconds >= 0 ? Math.min(seconds, 10) * 1000 : null
}

function sleep(ms: number): Promise<void> {
  return new Promise((done) => setTimeout(done, ms))
}
