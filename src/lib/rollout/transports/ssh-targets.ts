import {load} from 'js-yaml'

import {InputError, LocalpuppetError, NotFoundError, UsageError} from '../../errors.js'
import {readBoundedFile} from '../../util/bounded-read.js'
import {assertTrustedPath} from '../../util/trusted-path.js'

/*
 * Who a rollout over SSH reaches, and how: each node's name (what the rollout records and
 * shows), the host ssh connects to, and a user and port of its own when ssh's own defaults
 * (~/.ssh/config, ssh_config) are not meant. Everything else about the connection stays
 * ssh's: a name that is a `Host` alias in ~/.ssh/config is reached as that alias says.
 */

export interface SshTarget {
  node: string
  host: string
  user: string | null
  port: number | null
}

/** A node name: also what a --targets or --nodes entry names as its host. */
const NODE = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,252}$/
/** A host ssh may be given (never one that starts with "-": ssh would take it for an option). IPv6 in the inventory only. */
const HOST = /^[A-Za-z0-9_:][A-Za-z0-9_.:%-]{0,252}$/
const USER = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,31}$/
const MAX_INVENTORY_BYTES = 16 * 1024 * 1024

/** One `[user@]name[:port]` entry of --targets or a --nodes file; `where` names it in a message (64). */
export function parseTargetEntry(text: string, where: string): SshTarget {
  const match = /^(?:([^@]+)@)?([^@:]+)(?::(\d{1,5}))?$/.exec(text)
  const [, user, node, port] = match ?? []
  if (!match || !NODE.test(node)) throw new UsageError(`${where}: ${JSON.stringify(text)} is not [USER@]NODE[:PORT] (a node name of letters, digits, ".", "_", "-")`)
  if (user !== undefined && !USER.test(user)) throw new UsageError(`${where}: ${JSON.stringify(text)}: ${JSON.stringify(user)} is not a user name`)
  return {node, host: node, user: user ?? null, port: port === undefined ? null : checkPort(Number(port), `${where}: ${JSON.stringify(text)}`, UsageError)}
}

function checkPort(value: unknown, where: string, Error: typeof UsageError | typeof InputError): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > 65_535) throw new Error(`${where}: the port must be a whole number 1..65535, not ${JSON.stringify(value)}`)
  return value
}

function unique(targets: SshTarget[], where: string, Error: typeof UsageError | typeof InputError): SshTarget[] {
  const seen = new Set<string>()
  for (const target of targets) {
    if (seen.has(target.node)) throw new Error(`${where}: node ${target.node} is listed twice`)
    seen.add(target.node)
  }

  return targets
}

/** `--targets web1,deploy@web2,web3:2222`. */
export function parseTargetList(text: string): SshTarget[] {
  const entries = text.split(',').map((entry) => entry.trim())
  if (entries.some((entry) => entry === '')) throw new UsageError(`--targets ${JSON.stringify(text)}: expected node names separated by commas, such as web1,deploy@web2,web3:2222`)
  return unique(entries.map((entry) => parseTargetEntry(entry, '--targets')), '--targets', UsageError)
}

async function readText(file: string, flag: string): Promise<string> {
  try {
    const label = `${flag} ${file}`
    const bytes = await readBoundedFile(file, {maxBytes: MAX_INVENTORY_BYTES, label, error: (message) => new InputError(message)})
    // It names the hosts root logs in to and runs localpuppet on: only a file root (or this user) alone can write counts.
    assertTrustedPath(file, {what: `${flag} file`, overridable: false})
    return bytes.toString('utf8')
  } catch (error) {
    if (error instanceof LocalpuppetError) throw error
    const code = (error as NodeJS.ErrnoException).code
    if (code === 'ENOENT') throw new NotFoundError(`${flag} ${file}: no such file`)
    throw new InputError(`${flag} ${file}: ${(error as Error).message}`)
  }
}

/** A --nodes file: one `[user@]name[:port]` per line; blank lines and `#` comments are skipped. */
export async function readNodesFile(file: string): Promise<SshTarget[]> {
  const lines = (await readText(file, '--nodes')).split('\n')
  const targets: SshTarget[] = []
  for (const [index, line] of lines.entries()) {
    const entry = line.trim()
    if (entry === '' || entry.startsWith('#')) continue
    targets.push(parseTargetEntry(entry, `--nodes ${file}, line ${index + 1}`))
  }

  return unique(targets, `--nodes ${file}`, UsageError)
}

/**
 * An inventory (YAML): defaults for every node, then each node by name.
 *
 *     user: deploy          # optional: every node's user
 *     port: 22              # optional: every node's port
 *     nodes:
 *       web1:               # ssh web1 (an alias in ~/.ssh/config works)
 *       web2: {host: 10.0.0.2, user: admin, port: 2222}
 *
 * A mistake is 65, naming the file and the node or key at fault.
 */
export async function readInventory(file: string): Promise<SshTarget[]> {
  const where = `--inventory ${file}`
  let data: unknown
  try {
    data = load(await readText(file, '--inventory'))
  } catch (error) {
    if (error instanceof LocalpuppetError) throw error
    throw new InputError(`${where}: not YAML: ${(error as Error).message.split('\n')[0]}`)
  }

  const top = mapping(data, where)
  for (const key of Object.keys(top)) if (!['user', 'port', 'nodes'].includes(key)) throw new InputError(`${where}: unknown key ${JSON.stringify(key)} (expected user, port, nodes)`)
  const defaults = settings(top, where)
  const nodes = mapping(top.nodes, `${where}: nodes`)
  if (Object.keys(nodes).length === 0) throw new InputError(`${where}: nodes: no node listed`)
  return Object.entries(nodes).map(([node, value]) => {
    const at = `${where}: node ${JSON.stringify(node)}`
    if (!NODE.test(node)) throw new InputError(`${at}: not a node name (letters, digits, ".", "_", "-")`)
    const entry = value === null ? {} : mapping(value, at)
    for (const key of Object.keys(entry)) if (!['host', 'user', 'port'].includes(key)) throw new InputError(`${at}: unknown key ${JSON.stringify(key)} (expected host, user, port)`)
    const own = settings(entry, at)
    const host = entry.host === undefined ? node : entry.host
    if (typeof host !== 'string' || !HOST.test(host)) throw new InputError(`${at}: host ${JSON.stringify(host)} is not a host name or address`)
    return {node, host, user: own.user ?? defaults.user ?? null, port: own.port ?? defaults.port ?? null}
  })
}

function mapping(value: unknown, where: string): Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new InputError(`${where}: expected a mapping`)
  return value as Record<string, unknown>
}

function settings(entry: Record<string, unknown>, where: string): {user?: string; port?: number} {
  if (entry.user !== undefined && (typeof entry.user !== 'string' || !USER.test(entry.user))) throw new InputError(`${where}: user ${JSON.stringify(entry.user)} is not a user name`)
  return {user: entry.user as string | undefined, port: entry.port === undefined ? undefined : checkPort(entry.port, where, InputError)}
}
