import {existsSync} from 'node:fs'
import {resolve} from 'node:path'

import {Flags} from '@oclif/core'

import {NotFoundError, UsageError} from '../lib/errors.js'
import type {FleetSourceSpec} from '../lib/fleet/sources/index.js'
import {TRANSPORTS, type TransportSpec} from '../lib/rollout/transports/index.js'
import {findExecutable} from '../lib/util/find-executable.js'

/** -t: how long mco waits for each node's answer; what that answer is to (and its default) is the command's. */
export function replyTimeoutFlag(description: string) {
  return Flags.integer({char: 't', description, min: 1, helpValue: 'SECONDS'})
}

/**
 * How a fleet command reaches the fleet. The discovery flags are MCollective's own, spelt
 * as `mco` spells them, and passed to it as given; `mco localpuppet` hands its command line
 * over unchanged.
 */
export const fleetFlags = {
  via: Flags.string({description: 'how to reach the fleet [default: ssh with --targets or --inventory, else mco]', options: [...TRANSPORTS]}),
  'with-identity': Flags.string({char: 'I', aliases: ['wi'], description: 'mco discovery: nodes with this identity (repeatable)', multiple: true, helpValue: 'IDENT'}),
  with: Flags.string({char: 'W', description: 'mco discovery: combined classes and facts filter (repeatable)', multiple: true, helpValue: 'FILTER'}),
  'with-fact': Flags.string({char: 'F', aliases: ['wf'], description: 'mco discovery: nodes with this fact (fact=value, repeatable)', multiple: true, helpValue: 'FACT=VALUE'}),
  'with-class': Flags.string({char: 'C', aliases: ['wc'], description: 'mco discovery: nodes with this class (repeatable)', multiple: true, helpValue: 'CLASS'}),
  'with-agent': Flags.string({char: 'A', aliases: ['wa'], description: 'mco discovery: nodes with this agent (repeatable)', multiple: true, helpValue: 'AGENT'}),
  select: Flags.string({char: 'S', description: 'mco discovery: compound filter', helpValue: 'FILTER'}),
  nodes: Flags.string({description: 'the fleet is exactly the nodes in FILE (one per line; --via ssh: [USER@]NODE[:PORT]): one that does not answer is "no answer"', helpValue: 'FILE'}),
  dt: Flags.integer({aliases: ['discovery-timeout'], description: 'mco discovery timeout', min: 1, helpValue: 'SECONDS'}),
  target: Flags.string({char: 'T', description: 'mco sub-collective', helpValue: 'COLLECTIVE'}),
  'mco-config': Flags.string({description: "mco's client configuration (mco --config)", helpValue: 'FILE'}),
  'reply-timeout': replyTimeoutFlag('seconds a node has to answer a start (mco -t) [default: 30, 120 with --fetch]'),
  mco: Flags.string({description: 'the mco executable', default: 'mco', env: 'LOCALPUPPET_MCO', helpValue: 'PATH'}),
  targets: Flags.string({description: '--via ssh: the fleet is exactly these nodes, [USER@]NODE[:PORT] separated by commas', helpValue: 'LIST'}),
  inventory: Flags.string({description: '--via ssh: the fleet is the nodes of this inventory (YAML: user, port, nodes: NODE: {host, user, port})', helpValue: 'FILE'}),
  ssh: Flags.string({description: '--via ssh: the ssh executable (OpenSSH)', default: 'ssh', env: 'LOCALPUPPET_SSH', helpValue: 'PATH'}),
  'ssh-config': Flags.string({description: "--via ssh: ssh's client configuration (ssh -F) [default: ~/.ssh/config and ssh_config]", helpValue: 'FILE'}),
  'known-hosts': Flags.string({description: "--via ssh: the known hosts file (UserKnownHostsFile) [default: ssh's own]", helpValue: 'FILE'}),
  'connect-timeout': Flags.integer({description: '--via ssh: seconds ssh has to reach a node (ConnectTimeout); one not reached is "no answer" [default: 10]', min: 1, helpValue: 'SECONDS'}),
  'node-localpuppet': Flags.string({description: '--via ssh: the localpuppet command on the nodes [default: localpuppet on their PATH]', helpValue: 'PATH'}),
}

const MCO_ONLY = ['with-identity', 'with', 'with-fact', 'with-class', 'with-agent', 'select', 'dt', 'target', 'mco-config'] as const
const SSH_ONLY = ['targets', 'inventory', 'ssh-config', 'known-hosts', 'connect-timeout', 'node-localpuppet'] as const

export type FleetFlagValues = {
  via: string
  'with-identity'?: string[]
  with?: string[]
  'with-fact'?: string[]
  'with-class'?: string[]
  'with-agent'?: string[]
  select?: string
  nodes?: string
  dt?: number
  target?: string
  'mco-config'?: string
  'reply-timeout'?: number
  mco: string
  targets?: string
  inventory?: string
  ssh?: string
  'ssh-config'?: string
  'known-hosts'?: string
  'connect-timeout'?: number
  'node-localpuppet'?: string
}

/** How the flags reach the fleet: mco's discovery, or ssh to the nodes listed (a flag of the other is 64). */
export async function transportSpec(flags: FleetFlagValues): Promise<TransportSpec> {
  const via = flags.via ?? (flags.targets !== undefined || flags.inventory !== undefined ? 'ssh' : 'mco')
  const wrong = (via === 'ssh' ? MCO_ONLY : SSH_ONLY).find((name) => flags[name] !== undefined)
  if (wrong !== undefined) throw new UsageError(`--${wrong} is for --via ${via === 'ssh' ? 'mco' : 'ssh'}, not --via ${via}`)
  if (via === 'ssh') return sshSpec(flags)
  const discovery: string[] = []
  for (const [flag, values] of [
    ['-I', flags['with-identity']],
    ['-W', flags.with],
    ['-F', flags['with-fact']],
    ['-C', flags['with-class']],
    ['-A', flags['with-agent']],
  ] as const) {
    for (const value of values ?? []) discovery.push(flag, value)
  }

  if (flags.select) discovery.push('-S', flags.select)
  // Absolute: a resumed rollout may run from another directory.
  if (flags.nodes) discovery.push('--nodes', resolve(flags.nodes))
  const connection: string[] = []
  if (flags['mco-config']) connection.push('--config', flags['mco-config'])
  if (flags.target) connection.push('-T', flags.target)
  return {via: 'mco', mco: flags.mco, connection, discovery, replyTimeout: flags['reply-timeout'] ?? null, discoveryTimeout: flags.dt ?? null}
}

async function sshSpec(flags: FleetFlagValues): Promise<TransportSpec> {
  const given = (['nodes', 'targets', 'inventory'] as const).filter((name) => flags[name] !== undefined)
  if (given.length !== 1) throw new UsageError(`--via ssh reaches the nodes listed: give one of --nodes FILE, --targets LIST or --inventory FILE${given.length > 1 ? `, not ${given.map((name) => `--${name}`).join(' and ')}` : ''}`)
  const {parseTargetList, readInventory, readNodesFile} = await import('../lib/rollout/transports/ssh-targets.js')
  const targets = flags.targets === undefined ? flags.nodes === undefined ? await readInventory(flags.inventory!) : await readNodesFile(flags.nodes) : parseTargetList(flags.targets)
  const targetsFrom = flags.targets === undefined ? (flags.nodes === undefined ? `--inventory ${flags.inventory}` : `--nodes ${flags.nodes}`) : '--targets'
  // Absolute: a resumed rollout may run from another directory.
  const path = (file: string | undefined) => (file === undefined ? null : resolve(file))
  // What ssh runs (ProxyCommand, LocalCommand) and which host keys it believes: only what root (or this user) alone can write.
  const {assertTrustedPath} = await import('../lib/util/trusted-path.js')
  for (const flag of ['ssh-config', 'known-hosts'] as const) if (flags[flag] !== undefined) assertTrustedPath(resolve(flags[flag]), {what: `--${flag} file`, overridable: false})
  // The ssh root runs, as found now (one that cannot be found is 69 when it is run).
  const ssh = findExecutable(flags.ssh ?? 'ssh')
  if (ssh !== null) assertTrustedPath(ssh, {what: 'ssh executable', overridable: false})
  // A missing configuration is said here (66), not by ssh for every node (no answer); a known hosts file may not exist yet.
  if (flags['ssh-config'] !== undefined && !existsSync(flags['ssh-config'])) throw new NotFoundError(`--ssh-config ${flags['ssh-config']}: no such file`)
  return {
    via: 'ssh',
    ssh: flags.ssh ?? 'ssh',
    targets,
    targetsFrom,
    config: path(flags['ssh-config']),
    knownHosts: path(flags['known-hosts']),
    connectTimeout: flags['connect-timeout'] ?? null,
    localpuppet: flags['node-localpuppet'] ?? 'localpuppet',
    replyTimeout: flags['reply-timeout'] ?? null,
  }
}

/** fleet status's flags. */
export type FleetSourceFlagValues = Omit<FleetFlagValues, 'via'> & {
  via?: string
  prometheus?: string
  puppetdb?: string
  lookback?: string
  channel?: string
  'prometheus-timeout'?: string
  source?: string
  trust?: string[]
  insecure?: boolean
  'allow-untrusted'?: boolean
}

/** Where fleet status reads the fleet from: --via; else Prometheus with --prometheus URL or the prometheus setting (unless only MCollective's flags are given); else mco. Usage errors (64) before anything is asked. */
export async function fleetSourceSpec(flags: FleetSourceFlagValues): Promise<FleetSourceSpec> {
  const [{settingString}, {UsageError}] = await Promise.all([import('../lib/config/settings.js'), import('../lib/errors.js')])
  // --prometheus, else the prometheus setting (env, then the config file).
  const prometheus = await settingString('prometheus', flags.prometheus)
  // MCollective's own flags name MCollective, even where a prometheus setting is there.
  const mcoAsked = ['with-identity', 'with', 'with-fact', 'with-class', 'with-agent', 'select', 'nodes', 'dt', 'target', 'mco-config', 'reply-timeout'].some((name) => flags[name as keyof typeof flags] !== undefined)
  const sshAsked = flags.targets !== undefined || flags.inventory !== undefined
  if (flags.prometheus !== undefined && flags.puppetdb !== undefined) throw new UsageError('--prometheus and --puppetdb: give one source of the fleet')
  // PuppetDB when named (--puppetdb, --via puppetdb), or when it is the only source set up: the prometheus setting wins over the puppetdb setting.
  const puppetdb = await settingString('puppetdb', flags.puppetdb)
  const via =
    flags.via ??
    (sshAsked ? 'ssh' : flags.puppetdb !== undefined ? 'puppetdb' : prometheus && (flags.prometheus !== undefined || !mcoAsked) ? 'prometheus' : puppetdb && !mcoAsked ? 'puppetdb' : 'mco')
  if (via === 'puppetdb') return puppetDbSpec(flags, puppetdb)
  if (via !== 'prometheus') {
    const prometheusOnly = (['lookback', 'channel', 'prometheus-timeout', 'source'] as const).find((name) => flags[name] !== undefined)
    if (prometheusOnly) throw new UsageError(`--${prometheusOnly} reads the fleet from Prometheus or PuppetDB: give --prometheus URL or --puppetdb URL (or set prometheus or puppetdb), not --via ${via}`)
    // Named no way to the fleet: MCollective, the default, is checked in seconds, not after mco's minute of retries
    // (not a wrapper named by --mco, whose configuration is its own).
    const probe = via === 'mco' && flags.via === undefined && flags.mco === 'mco' ? {mco: flags.mco, config: flags['mco-config']} : undefined
    return {via: 'mco', transport: await transportSpec({...flags, via}), probe}
  }

  if (!prometheus) throw new UsageError('--via prometheus needs --prometheus URL (or the prometheus setting)')
  const [{parseDuration}, {usageChannelName}] = await Promise.all([import('../lib/util/duration.js'), import('../lib/release/release-ref.js')])
  const lookbackMs = flags.lookback ? parseDuration(flags.lookback, '--lookback') : undefined
  const deadlineMs = flags['prometheus-timeout'] ? parseDuration(flags['prometheus-timeout'], '--prometheus-timeout') : undefined
  if (flags.channel !== undefined) usageChannelName(flags.channel, '--channel')
  const wanted = {source: flags.source, trust: flags.trust, insecure: flags.insecure, allowUntrusted: flags['allow-untrusted']}
  return {via: 'prometheus', url: prometheus, lookbackMs, deadlineMs, channel: flags.channel, wanted}
}

async function puppetDbSpec(flags: FleetSourceFlagValues, url: string | null): Promise<FleetSourceSpec> {
  if (!url) throw new UsageError('--via puppetdb needs --puppetdb URL (or the puppetdb setting)')
  const [{parseDuration}, {usageChannelName}, {puppetDbConfig}] = await Promise.all([import('../lib/util/duration.js'), import('../lib/release/release-ref.js'), import('../lib/puppetdb/client.js')])
  if (flags['prometheus-timeout'] !== undefined) throw new UsageError('--prometheus-timeout is for --prometheus, not --puppetdb')
  const lookbackMs = flags.lookback ? parseDuration(flags.lookback, '--lookback') : undefined
  if (flags.channel !== undefined) usageChannelName(flags.channel, '--channel')
  const wanted = {source: flags.source, trust: flags.trust, insecure: flags.insecure, allowUntrusted: flags['allow-untrusted']}
  return {via: 'puppetdb', puppetdb: (await puppetDbConfig(url))!, lookbackMs, channel: flags.channel, wanted}
}
