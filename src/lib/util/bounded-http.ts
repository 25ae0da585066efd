import {Agent, request} from 'undici'

import {meterRate} from './rate-floor.js'
import {timerDelay} from './timer-delay.js'

/** TLS for a server that wants client certificates (PuppetDB): the CA to check it by, this side's certificate and key, as PEM text. */
export interface ClientTls {
  ca?: string
  cert?: string
  key?: string
}

export interface BoundedRequest {
  method?: 'GET' | 'POST'
  headers?: Record<string, string>
  body?: string | Buffer
  tls?: ClientTls
  /** Connecting, waiting for the header, any pause in the body; the rate floor's window (ms). */
  timeoutMs: number
  /** The whole exchange, from connecting to the last byte (ms). */
  deadlineMs: number
  /** The largest answer read (bytes): past it, the exchange fails. */
  maxBytes: number
  signal?: AbortSignal
}

export interface BoundedAnswer {
  status: number
  headers: Record<string, string | string[] | undefined>
  body: Buffer
}

/** Why a bounded exchange failed: the caller words it (naming its server) and picks the exit code. */
export class BoundedHttpError extends Error {
  constructor(
    message: string,
    /** `deadline`: the whole exchange took too long; `size`: the answer was too large; `network`: anything else. */
    readonly kind: 'deadline' | 'size' | 'network',
  ) {
    super(message)
  }
}

/**
 * One HTTP exchange whose answer is read whole into memory, bounded in time (connect,
 * header and pause timeouts, a rate floor, a deadline for the whole) and in size. For
 * servers whose answers are small by design (PuppetDB's command acknowledgements, a
 * bounded query): anything larger is refused, never buffered. Redirects are not followed.
 * TLS material is given as text, so a caller reads (and judges) its files once.
 */
export async function boundedRequest(url: URL, options: BoundedRequest): Promise<BoundedAnswer> {
  const timeoutMs = timerDelay(options.timeoutMs)
  const deadline = new AbortController()
  const timer = setTimeout(() => deadline.abort(), timerDelay(options.deadlineMs))
  const onAbort = () => deadline.abort()
  options.signal?.addEventListener('abort', onAbort, {once: true})
  const dispatcher = new Agent({connectTimeout: timeoutMs, connect: options.tls ? {...options.tls} : undefined})
  try {
    const response = await request(url, {
      method: options.method ?? 'GET',
      headers: options.headers,
      body: options.body,
      dispatcher,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      signal: deadline.signal,
    })
    const chunks: Buffer[] = []
    let size = 0
    for await (const chunk of meterRate(response.body, 'the answer', timeoutMs)) {
      size += (chunk as Buffer).length
      if (size > options.maxBytes) {
        response.body.destroy()
        throw new BoundedHttpError(`answer larger than ${options.maxBytes} bytes`, 'size')
      }

      chunks.push(chunk as Buffer)
    }

    return {status: response.statusCode, headers: response.headers, body: Buffer.concat(chunks)}
  } catch (error) {
    if (error instanceof BoundedHttpError) throw error
    if (deadline.signal.aborted && !options.signal?.aborted) throw new BoundedHttpError(`no whole answer within ${options.deadlineMs / 1000} s`, 'deadline')
    const cause = (error as {cause?: {message?: string; code?: string}}).cause
    const message = (error as Error).message || String(error)
    throw new BoundedHttpError(cause?.message && !message.includes(cause.message) ? `${message}: ${cause.message}` : message, 'network')
  } finally {
    clearTimeout(timer)
    options.signal?.removeEventListener('abort', onAbort)
    void dispatcher.close().catch(() => {})
  }
}
