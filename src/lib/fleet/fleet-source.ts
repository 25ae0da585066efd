import {stat} from 'node:fs/promises'
import {connect} from 'node:net'
import {homedir} from 'node:os'
import {join} from 'node:path'

import {FleetUnavailableError, InputError} from '../errors.js'
import {decodeUtf8Strict, readBoundedFile} from '../util/bounded-read.js'
import {findExecutable} from '../util/find-executable.js'

/** How long `fleet status` with no source named gives MCollective's broker to accept a connection before saying so. */
export const BROKER_PROBE_MS = 2000

/** Where a fleet command can read the fleet from, for the message of one that has none. */
export const FLEET_SOURCES_HINTS = [
  "--prometheus URL reads the fleet from the node metrics (or set prometheus in /etc/localpuppet/config.yaml, env LOCALPUPPET_PROMETHEUS)",
  "--via mco asks each node through MCollective: its client (mco) installed, a client configuration (--mco-config) and its broker up (mco ping)",
]

export interface McoProbe {
  /** The mco executable (--mco). */
  mco: string
  /** --mco-config, when given. */
  config?: string
  env?: NodeJS.ProcessEnv
  /** How long the broker has to accept a connection (ms, default BROKER_PROBE_MS). */
  timeoutMs?: number
}

/**
 * For a fleet command that was named no way to reach the fleet (no --via, no Prometheus):
 * whether MCollective, the default, can be reached at all, found out in at most
 * `timeoutMs` rather than in mco's own minute of retries. Throws 69 naming both ways
 * (Prometheus and MCollective) when mco is not installed, its client configuration is
 * missing, or the broker it names does not accept a connection; returns when it does, or
 * when the configuration names no broker this can check (mco then says what it says).
 */
export async function assertMcoReachable(probe: McoProbe): Promise<void> {
  const env = probe.env ?? process.env
  const fail = (why: string) => new FleetUnavailableError(`no fleet to read: no Prometheus is set, and MCollective cannot be used: ${why}`, FLEET_SOURCES_HINTS)
  if (findExecutable(probe.mco, env) === null) throw fail(`${probe.mco} is not installed (not on PATH)`)
  // mco's own order: --config, else ~/.mcollective when there is one, else the system's.
  const path = probe.config ?? ((await exists(join(homedir(), '.mcollective'))) ? join(homedir(), '.mcollective') : '/etc/mcollective/client.cfg')
  let text: string
  try {
    const bytes = await readBoundedFile(path, {maxBytes: 1024 * 1024, label: `mco client configuration ${path}`, error: (message) => new InputError(message)})
    text = decodeUtf8Strict(bytes, path, (message) => new InputError(message))
  } catch (error) {
    throw fail(`its client configuration ${path} cannot be read (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`)
  }

  const broker = brokerOf(text)
  if (broker === null) return
  const why = await tcpProbe(broker.host, broker.port, probe.timeoutMs ?? BROKER_PROBE_MS)
  if (why !== null) throw fail(`its broker ${broker.host}:${broker.port} (${path}) ${why}`)
}

/** The first broker an mco client configuration names (`connector`, `plugin.<connector>.pool.1.host` and `.port`), or null. */
export function brokerOf(text: string): {host: string; port: number} | null {
  const settings = new Map<string, string>()
  for (const line of text.split('\n')) {
    const match = /^\s*([\w.]+)\s*=\s*(.*?)\s*$/.exec(line)
    if (match) settings.set(match[1], match[2])
  }

  const connector = settings.get('connector')
  if (connector === undefined || !/^\w+$/.test(connector)) return null
  const host = settings.get(`plugin.${connector}.pool.1.host`)
  const port = Number(settings.get(`plugin.${connector}.pool.1.port`) ?? '61613')
  if (!host || !Number.isInteger(port) || port < 1 || port > 65_535) return null
  return {host, port}
}

/** null when host:port accepts a TCP connection within timeoutMs, else why not. */
function tcpProbe(host: string, port: number, timeoutMs: number): Promise<string | null> {
  return new Promise((done) => {
    const socket = connect({host, port})
    const finish = (why: string | null) => {
      clearTimeout(timer)
      socket.destroy()
      done(why)
    }

    const timer = setTimeout(() => finish(`does not answer within ${timeoutMs / 1000} s`), timeoutMs)
    socket.once('connect', () => finish(null))
    socket.once('error', (error: NodeJS.ErrnoException) => finish(`cannot be reached (${error.code ?? error.message})`))
  })
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  )
}
