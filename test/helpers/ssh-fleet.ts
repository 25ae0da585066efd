import {spawn} from 'node:child_process'
import {closeSync, openSync, readFileSync, readdirSync} from 'node:fs'
import {mkdir, mkdtemp, readFile, readdir, rm, writeFile} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'

import {execa} from 'execa'

import {BIN} from './cli.js'
import {type Node, prepareNode} from './fleet.js'
import {freePort, portOpen} from './net.js'
import {needPackages} from './packages.js'

/*
 * A fleet reached over SSH on 127.0.0.1: one real sshd per node, on its own port with its
 * own host key, each standing for one node. Every daemon logs in the same local account,
 * so a node's own localpuppet configuration (module dir, state dir, input, Puppet dirs:
 * fleet.ts's per-node set-up) comes from its daemon: `SetEnv LOCALPUPPET_CONFIG=...` in
 * that daemon's sshd_config, which sshd puts into every session's environment whatever
 * the client sends (a client cannot pick another node's configuration). The operator's ssh
 * gets its key, and each node's name as a Host alias for its daemon, from a client
 * configuration of the test's own (-F), and the host keys from a known hosts file of its own. Every sshd is started and stopped by
 * its PID (with the session processes it forked), in stopSshFleet and on exit.
 */

export const SSHD = '/usr/sbin/sshd'
const PACKAGES = ['openssh-server', 'openssh-client']

export interface SshNode extends Node {
  sshPort: number
  pid?: number
  exit?: Promise<unknown>
}

export let base = ''
export const nodes: SshNode[] = []
export let deadline = Number.POSITIVE_INFINITY
const started = new Set<number>()
process.once('exit', () => {
  for (const pid of started) {
    try {
      process.kill(-pid, 'SIGKILL')
    } catch {}
  }
})

export const missingPackages = () => needPackages(PACKAGES)
export const node = (name: string) => nodes.find((entry) => entry.name === name)!
export const clientConfig = () => join(base, 'ssh_config')
export const knownHosts = () => join(base, 'known_hosts')
export const inventory = () => join(base, 'inventory.yaml')
export const operatorState = () => join(base, 'operator')
export const runIds = async (name: string) => (await readdir(join(node(name).state, 'runs')).catch(() => [] as string[])).sort()

export function remaining(): number {
  const left = deadline - Date.now()
  if (left <= 0) throw new Error('the SSH fleet test ran out of its time')
  return left
}

/** Runs ssh-keygen (a key pair, no passphrase). */
async function keygen(file: string): Promise<string> {
  await execa('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', '', '-f', file])
  return (await readFile(`${file}.pub`, 'utf8')).trim()
}

/** The known hosts line of a node: its port's entry with this public key. */
export const knownHostsLine = (entry: SshNode, publicKey: string) => `[127.0.0.1]:${entry.sshPort} ${publicKey.split(' ').slice(0, 2).join(' ')}`

/** Starts (or starts again) a node's sshd, the leader of its own process group; resolves once it listens. */
export async function startSshd(entry: SshNode): Promise<void> {
  const log = openSync(join(entry.dir, 'sshd.log'), 'a')
  const child = spawn(SSHD, ['-D', '-e', '-f', join(entry.dir, 'sshd_config')], {detached: true, stdio: ['ignore', log, log]})
  closeSync(log)
  if (child.pid === undefined) throw new Error(`sshd of ${entry.name} did not start`)
  entry.pid = child.pid
  started.add(child.pid)
  entry.exit = new Promise((resolve) => child.once('exit', resolve))
  for (let i = 0; i < 100 && !(await portOpen(entry.sshPort)); i++) await sleep(50)
  if (!(await portOpen(entry.sshPort))) throw new Error(`sshd of ${entry.name} does not listen: ${readFileSync(join(entry.dir, 'sshd.log'), 'utf8')}`)
}

/** The processes whose parent is `pid` (sshd's sessions leave its process group with setsid). */
function children(pid: number): number[] {
  const found: number[] = []
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8')
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid) found.push(Number(name))
    } catch {}
  }

  return found
}

/** Stops a node's sshd and every session it forked, so that the node can no longer be reached (runs it started go on). */
export async function stopSshd(entry: SshNode): Promise<void> {
  if (entry.pid === undefined) return
  const sessions = children(entry.pid)
  for (const pid of [-entry.pid, ...sessions]) {
    try {
      process.kill(pid, 'SIGKILL')
    } catch {}
  }

  await Promise.race([entry.exit, sleep(5000)])
  started.delete(entry.pid)
  entry.pid = undefined
}

/** One node's daemon: its own port, host key and node configuration. `extra`: more sshd_config lines. */
async function writeSshd(entry: SshNode, settings: string, extra: string[]): Promise<string> {
  const hostKey = join(entry.dir, 'ssh_host_ed25519_key')
  const publicKey = await keygen(hostKey)
  await writeFile(
    join(entry.dir, 'sshd_config'),
    [
      `Port ${entry.sshPort}`,
      'ListenAddress 127.0.0.1',
      `HostKey ${hostKey}`,
      `PidFile ${join(entry.dir, 'sshd.pid')}`,
      `AuthorizedKeysFile ${join(base, 'authorized_keys')}`,
      'UsePAM no',
      // The test's files are under /tmp, which StrictModes would refuse as world-writable.
      'StrictModes no',
      'PasswordAuthentication no',
      'KbdInteractiveAuthentication no',
      'PermitRootLogin prohibit-password',
      `SetEnv LOCALPUPPET_CONFIG=${settings}`,
      ...extra,
      '',
    ].join('\n'),
  )
  return publicKey
}

/**
 * Starts one sshd per [name, role, port]; `extra[name]` adds sshd_config lines (a
 * ForceCommand whose shell prints around every command). Writes the client's key,
 * configuration, known hosts and an inventory naming every node with its port.
 */
export async function startSshFleet(spec: ReadonlyArray<readonly [string, 'web' | 'db', number]>, overallMs: number, extra: Record<string, string[]> = {}): Promise<void> {
  deadline = Date.now() + overallMs
  base = await mkdtemp(join(tmpdir(), 'localpuppet-ssh-fleet-'))
  // sshd run as root needs its privilege separation directory (the ssh service would make it).
  if (process.getuid?.() === 0) await mkdir('/run/sshd', {recursive: true, mode: 0o755})
  const clientKey = await keygen(join(base, 'client_key'))
  await writeFile(join(base, 'authorized_keys'), `${clientKey}\n`)
  const clientSettings = ['Host *', `  IdentityFile ${join(base, 'client_key')}`, '  IdentitiesOnly yes', '  LogLevel ERROR', ''].join('\n')
  const lines: string[] = []
  for (const [name, role, port] of spec) {
    const entry: SshNode = {name, role, port, dir: join(base, name), state: join(base, name, 'state'), sshPort: await freePort()}
    nodes.push(entry)
    await mkdir(entry.dir, {recursive: true})
    const settings = await prepareNode(entry)
    lines.push(knownHostsLine(entry, await writeSshd(entry, settings, extra[name] ?? [])))
    await startSshd(entry)
  }

  await writeFile(knownHosts(), lines.join('\n') + '\n')
  // Each node's name is also a Host alias for its daemon, as in an operator's ~/.ssh/config: `--nodes` needs no ports.
  await writeFile(clientConfig(), [...nodes.flatMap((entry) => [`Host ${entry.name}`, '  HostName 127.0.0.1', `  Port ${entry.sshPort}`]), clientSettings].join('\n'))
  await writeFile(inventory(), ['nodes:', ...nodes.map((entry) => `  ${entry.name}: {host: 127.0.0.1, port: ${entry.sshPort}}`), ''].join('\n'))
}

/** Stops every run still going on a node, every sshd, and removes the fleet's directory. */
export async function stopSshFleet(): Promise<void> {
  for (const entry of nodes) {
    for (const id of await readdir(join(entry.state, 'runs')).catch(() => [] as string[])) {
      const record = JSON.parse(await readFile(join(entry.state, 'runs', id, 'run.json'), 'utf8').catch(() => '{}'))
      if (record.state !== 'running' || typeof record.pid !== 'number') continue
      try {
        process.kill(record.pid, 'SIGTERM')
      } catch {}
    }

    await stopSshd(entry)
  }

  if (base) await rm(base, {recursive: true, force: true})
}

/** The flags that reach this fleet over SSH (its inventory, client configuration, known hosts, this checkout's localpuppet). */
export const sshFlags = () => ['--via', 'ssh', '--ssh-config', clientConfig(), '--known-hosts', knownHosts(), '--node-localpuppet', BIN, '--connect-timeout', '3']

/** `localpuppet ARGS` as the operator runs it, started: the caller awaits or kills it. */
export function startOperator(args: string[]) {
  return execa('node', [BIN, ...args], {reject: false, stdin: 'ignore', timeout: Math.min(300_000, remaining()), env: {LOCALPUPPET_STATE_DIR: operatorState(), FORCE_COLOR: '0'}})
}

export async function operator(args: string[]): Promise<{exitCode: number; stdout: string; stderr: string; json: any}> {
  const result = await startOperator(args)
  let json: any
  try {
    json = JSON.parse(String(result.stdout))
  } catch {}

  return {exitCode: result.exitCode ?? -1, stdout: String(result.stdout), stderr: String(result.stderr), json}
}

/** localpuppet run on a node by hand (disable, enable), with that node's configuration. */
export async function onNode(name: string, args: string[]) {
  return execa('node', [BIN, ...args], {reject: false, stdin: 'ignore', env: {LOCALPUPPET_CONFIG: join(node(name).dir, 'config.yaml')}})
}
