import {mkdir, writeFile} from 'node:fs/promises'
import {join} from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'

import {execa, type ResultPromise} from 'execa'

import {type StartedServer, freePort} from './net.js'

export const PROMETHEUS = '/usr/bin/prometheus'
export const NODE_EXPORTER = '/usr/bin/prometheus-node-exporter'

export type Started = StartedServer

/** Starts `file args`, waits until `ready` answers for `url`, else stops it and throws with its output. */
async function startServer(file: string, args: (port: number) => string[], ready: string, what: string): Promise<Started> {
  for (let attempt = 0; ; attempt++) {
    const port = await freePort()
    const child = execa(file, args(port), {reject: false, stdin: 'ignore', all: true, buffer: true}) as unknown as ResultPromise<{reject: false; all: true}>
    let exited = false
    void child.then(() => {
      exited = true
    })
    const stop = async () => {
      if (exited) return
      process.kill(child.pid!, 'SIGTERM')
      await Promise.race([child, sleep(10_000)])
      if (!exited) process.kill(child.pid!, 'SIGKILL')
      await child
    }

    const url = `http://127.0.0.1:${port}`
    const until = Date.now() + 30_000
    while (!exited && Date.now() < until) {
      try {
        const response = await fetch(url + ready)
        await response.arrayBuffer()
        if (response.ok) return {url, port, pid: child.pid!, stop}
      } catch {}

      await sleep(100)
    }

    const timedOut = !exited
    await stop()
    // Another process may have taken the port between freePort and the bind: try another.
    if (attempt >= 2 || timedOut) throw new Error(`${what} did not start on ${url}: ${String((await child).all).slice(-2000)}`)
  }
}

/** Debian's prometheus-node-exporter with only the textfile collector, reading `textfiles`. */
export async function startNodeExporter(textfiles: string): Promise<Started> {
  await mkdir(textfiles, {recursive: true})
  return startServer(
    NODE_EXPORTER,
    (port) => [`--web.listen-address=127.0.0.1:${port}`, '--collector.disable-defaults', '--collector.textfile', `--collector.textfile.directory=${textfiles}`],
    '/metrics',
    'prometheus-node-exporter',
  )
}

export interface PrometheusServer extends Started {
  /** An instant query through the HTTP API: the result vector. */
  query(promql: string): Promise<Array<{metric: Record<string, string>; value: [number, string]}>>
  /** The alerts its rules have now (GET /api/v1/alerts): pending and firing, with their annotations. */
  alerts(): Promise<Array<{labels: Record<string, string>; annotations: Record<string, string>; state: string}>>
}

/**
 * Debian's prometheus scraping `targets` (host:port) as job `job` every `interval`, its
 * configuration and TSDB under `work`, evaluating the rule files `rules` (absolute paths)
 * as often.
 */
export async function startPrometheus(work: string, targets: string[], options: {job?: string; interval?: string; rules?: string[]} = {}): Promise<PrometheusServer> {
  await mkdir(work, {recursive: true})
  const config = join(work, 'prometheus.yml')
  const interval = options.interval ?? '1s'
  await writeFile(
    config,
    [
      'global:',
      `  scrape_interval: ${interval}`,
      `  evaluation_interval: ${interval}`,
      ...(options.rules?.length ? ['rule_files:', ...options.rules.map((rule) => `  - ${JSON.stringify(rule)}`)] : []),
      'scrape_configs:',
      `  - job_name: ${options.job ?? 'localpuppet'}`,
      `    scrape_timeout: ${interval}`,
      '    static_configs:',
      `      - targets: [${targets.map((target) => JSON.stringify(target)).join(', ')}]`,
      '',
    ].join('\n'),
  )
  const started = await startServer(
    PROMETHEUS,
    (port) => [`--config.file=${config}`, `--storage.tsdb.path=${join(work, 'data')}`, `--web.listen-address=127.0.0.1:${port}`],
    '/-/ready',
    'prometheus',
  )
  return {
    ...started,
    async query(promql) {
      const response = await fetch(`${started.url}/api/v1/query?${new URLSearchParams({query: promql})}`)
      const doc = (await response.json()) as {status: string; error?: string; data: {result: Array<{metric: Record<string, string>; value: [number, string]}>}}
      if (doc.status !== 'success') throw new Error(`prometheus query ${promql}: ${doc.error}`)
      return doc.data.result
    },
    async alerts() {
      const doc = (await (await fetch(`${started.url}/api/v1/alerts`)).json()) as {data: {alerts: Array<{labels: Record<string, string>; annotations: Record<string, string>; state: string}>}}
      return doc.data.alerts
    },
  }
}

/** A relay in front of an exporter that can hold what Prometheus scrapes (see startScrapeRelay). */
export interface ScrapeRelay {
  /** host:port, Prometheus' target. */
  target: string
  /** From now on, every scrape gets the exporter's answer as it is at this moment. */
  hold(): Promise<void>
  /** Scrapes reach the exporter again. */
  release(): void
  /** How many scrapes reached the relay since it started. */
  scrapes(): number
  close(): Promise<void>
}

/**
 * An HTTP relay on 127.0.0.1 between Prometheus and a real exporter (`upstream`, its
 * /metrics URL). While held, Prometheus is answered with what the exporter said when
 * hold() was called: a test decides when Prometheus sees a node's new metrics (so "not
 * scraped yet" is a state the test sets, not a race it hopes to win), and the series
 * stay fresh meanwhile (no failed scrape, nothing goes stale).
 */
export async function startScrapeRelay(upstream: string): Promise<ScrapeRelay> {
  const {createServer} = await import('node:http')
  let held: {body: string; type: string} | null = null
  let count = 0
  const live = async () => {
    const response = await fetch(upstream)
    return {body: await response.text(), type: response.headers.get('content-type') ?? 'text/plain; version=0.0.4'}
  }

  const server = createServer(async (req, res) => {
    count++
    try {
      const answer = held ?? (await live())
      res.writeHead(200, {'content-type': answer.type})
      res.end(answer.body)
    } catch (error) {
      res.writeHead(502)
      res.end(String(error))
    }
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const {port} = server.address() as {port: number}
  return {
    target: `127.0.0.1:${port}`,
    async hold() {
      held = await live()
    },
    release() {
      held = null
    },
    scrapes: () => count,
    async close() {
      server.closeAllConnections()
      await new Promise((resolve) => server.close(resolve))
    },
  }
}
