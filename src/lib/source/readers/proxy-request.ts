import type {Readable} from 'node:stream'

import {type Dispatcher, EnvHttpProxyAgent, request} from 'undici'

import {urlCredentials} from '../../util/url-credentials.js'

/**
 * undici's side of HttpTransport: only for a request a proxy variable applies to, so that
 * undici (bundled apart, ~0.1 s to load) is loaded then and only then. Imported lazily.
 */
export function proxyAgent(options: {httpProxy?: string; httpsProxy?: string; noProxy?: string; timeoutMs: number}): Dispatcher {
  return new EnvHttpProxyAgent({
    httpProxy: options.httpProxy,
    httpsProxy: options.httpsProxy,
    noProxy: options.noProxy,
    // Plain http through a proxy as curl does it (absolute-form GET): squid's default
    // configuration refuses CONNECT to port 80. https still tunnels.
    proxyTunnel: false,
    connect: {timeout: options.timeoutMs},
    headersTimeout: options.timeoutMs,
    bodyTimeout: options.timeoutMs,
  })
}

/** One GET through the agent, no redirect followed. */
export async function proxyGet(url: URL, dispatcher: Dispatcher, timeoutMs: number, extra: Record<string, string> = {}): Promise<{status: number; headers: Record<string, string | string[] | undefined>; body: Readable}> {
  // undici, unlike node:http, sends no Authorization for a URL's user and password: a source
  // `https://user:pass@host/repo` must authenticate through a proxy as it does without one.
  const credentials = urlCredentials(url)
  const headers = credentials ? {...extra, authorization: `Basic ${Buffer.from(`${credentials.user}:${credentials.password}`).toString('base64')}`} : extra
  const response = await request(url, {method: 'GET', dispatcher, headers, headersTimeout: timeoutMs, bodyTimeout: timeoutMs})
  return {status: response.statusCode, headers: response.headers, body: response.body as unknown as Readable}
}
