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
}

/**
 * Debian's prometheus scraping `targets` (host:port) as job `job` every `interval`, its
 * configuration and TSDB under `work`.
 */
export async function startPrometheus(work: string, targets: string[], options: {job?: string; interval?: string} = {}): Promise<PrometheusServer> {
  await mkdir(work, {recursive: true})
  const config = join(work, 'prometheus.yml')
  const interval = options.interval ?? '1s'
  await writeFile(
    config,
    [
      'global:',
      `  scrape_interval: ${interval}`,
      `  evaluation_interval: ${interval}`,
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
  }
}
