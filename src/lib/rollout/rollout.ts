import {readFile} from 'node:fs/promises'

import {FleetUnavailableError, LocalpuppetError, NotFoundError, UsageError} from '../errors.js'
import {ExitCode} from '../exit-codes.js'
import {compareNatural} from '../util/natural-order.js'
import {terminalText} from '../util/terminal-text.js'
import {type Clock, type RolloutTransport, driveRollout} from './drive.js'
import {type NodeReport, RolloutEngine} from './engine.js'
import {type NodeClaim, claimNodes} from './exclusion.js'
import {type RolloutRecord, RolloutStore, type TransportSpec, engineFromRecord, openRolloutsDir, readFleetMemory, readRolloutRecord, writeFleetMemory} from './record.js'
import {RollbackStarts} from './revert-transport.js'
import type {RolloutSettings} from './settings.js'
import {McoTransport} from './transports/mco.js'
import {SshTransport} from './transports/ssh.js'

/** What a person sees while a rollout runs; nothing in the library prints. */
export interface RolloutIo {
  warn(line: string): void
  progress?(engine: RolloutEngine): void
}

export interface RolloutOptions {
  stateDir: string
  allowUntrusted?: boolean
  signal?: AbortSignal
  clock?: Clock
}

export interface RolloutResult {
  record: RolloutRecord
  /** 0 every targeted node ended on the release with success (or was up to date); 1 otherwise; 130/143 interrupted. */
  exitCode: number
}

/** An identity mco may report that is safe in a nodes file and a `runs=` argument. */
const IDENTITY = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,252}$/

export const systemClock: Clock = {
  now: () => Date.now(),
  sleep: (ms, signal) =>
    new Promise((resolve) => {
      const timer = setTimeout(resolve, ms)
      signal?.addEventListener('abort', () => (clearTimeout(timer), resolve(undefined)), {once: true})
    }),
}

/** The transport a spec names, by its `via`; `statusTimeout`: the time a status request has (fleet status -t). */
export function openTransport(spec: TransportSpec, options: {statusTimeout?: number | null; warn?: (line: string) => void} = {}): McoTransport | SshTransport {
  if (spec.via === 'ssh') return new SshTransport({...spec, statusTimeout: options.statusTimeout ?? spec.statusTimeout}, options.warn)
  return new McoTransport({mco: spec.mco, connection: spec.connection, discovery: spec.discovery, replyTimeout: spec.replyTimeout, discoveryTimeout: spec.discoveryTimeout, statusTimeout: options.statusTimeout})
}

/** The fleet a rollout or fleet status expects, in natural name order (db2 before db10): a --nodes file says it; otherwise what discovery finds and what it found before. */
export async function expectedFleet(
  transport: McoTransport | SshTransport,
  memoryDir: string,
  options: {allowUntrusted?: boolean; signal?: AbortSignal; warn(line: string): void},
): Promise<{expected: string[]; expectedFrom: string; answers: Record<string, NodeReport>; remember(): Promise<void>}> {
  if (transport instanceof SshTransport) {
    // Over SSH the fleet is exactly the targets given (--nodes, --targets, --inventory).
    const expected = transport.options.targets.map((target) => target.node).sort(compareNatural)
    return {expected, expectedFrom: `${transport.options.targetsFrom} (${expected.length})`, answers: await transport.discover(options.signal), remember: async () => {}}
  }

  const {discovery, connection} = transport.options
  const nodesAt = discovery.indexOf('--nodes')
  const found = await transport.discover(options.signal)
  const answers: Record<string, NodeReport> = {}
  for (const [node, report] of Object.entries(found)) {
    if (IDENTITY.test(node)) answers[node] = report
    else options.warn(`ignored a reply from "${terminalText(node, 80)}": not a node name`)
  }

  if (nodesAt !== -1) {
    const file = discovery[nodesAt + 1]
    const text = await readFile(file, 'utf8').catch((error: NodeJS.ErrnoException) => {
      throw new NotFoundError(`--nodes ${file}: ${error.code === 'ENOENT' ? 'no such file' : error.message}`)
    })
    const listed = [...new Set(text.split('\n').map((line) => line.trim()).filter((line) => line !== '' && !line.startsWith('#')))]
    const bad = listed.find((name) => !IDENTITY.test(name))
    if (bad !== undefined) throw new UsageError(`--nodes ${file}: ${JSON.stringify(bad)} is not a node name`)
    for (const node of Object.keys(answers)) if (!listed.includes(node)) delete answers[node]
    return {expected: listed.sort(compareNatural), expectedFrom: `--nodes ${file} (${listed.length})`, answers, remember: async () => {}}
  }

  // Nodes named with -I (not /regex/) are expected, like --nodes: a named node that is down
  // is "no answer", never left out (and never left out of the fleet remembered for the filters).
  const named = literalIdentities(discovery)
  const onlyNamed = named.length > 0 && discovery.every((value, i) => (i % 2 === 0 ? value === '-I' : named.includes(value)))
  if (onlyNamed) {
    for (const node of Object.keys(answers)) if (!named.includes(node)) delete answers[node]
    const silent = named.filter((node) => !Object.hasOwn(answers, node))
    return {expected: [...named].sort(compareNatural), expectedFrom: `-I (${named.length}${silent.length > 0 ? `; ${silent.join(', ')} did not answer` : ''})`, answers, remember: async () => {}}
  }

  const key = JSON.stringify({connection, discovery})
  const memory = await readFleetMemory(memoryDir, options.allowUntrusted)
  const before = memory[key]?.nodes.filter((node) => IDENTITY.test(node)) ?? []
  const discovered = Object.keys(answers)
  const missing = [...new Set([...before, ...named])].filter((node) => !discovered.includes(node))
  const expected = [...new Set([...discovered, ...missing])].sort(compareNatural)
  const expectedFrom = `discovery (${discovered.length})${missing.length > 0 ? ` and the nodes named with -I or found by the last discovery with these filters (${missing.join(', ')} did not answer now)` : ''}`
  return {
    expected,
    expectedFrom,
    answers,
    async remember() {
      memory[key] = {nodes: expected, at: new Date().toISOString()}
      await writeFleetMemory(memoryDir, memory)
    },
  }
}

/** The identities given with -I that name one node (mco takes `/.../` as a regular expression). */
function literalIdentities(discovery: string[]): string[] {
  const named: string[] = []
  for (let i = 0; i < discovery.length - 1; i++) {
    if (discovery[i] === '-I' && IDENTITY.test(discovery[i + 1]) && !named.includes(discovery[i + 1])) named.push(discovery[i + 1])
  }

  return named
}

/** 0 when every targeted node ended on the release with success (or was up to date, or nothing was targeted... never: no nodes is 1). */
export function rolloutExitCode(engine: RolloutEngine): number {
  const nodes = engine.state.nodes
  if (nodes.length === 0) return ExitCode.failed
  const ok = nodes.every((node) => node.state === 'up to date' || (node.state === 'succeeded' && node.revert?.state !== 'succeeded'))
  return ok ? ExitCode.ok : ExitCode.failed
}

/** Starts a rollout: discovers the fleet, records it, and drives it to the end (or until stopped). */
export async function startRollout(settings: RolloutSettings, spec: TransportSpec, options: RolloutOptions, io: RolloutIo): Promise<RolloutResult> {
  const {dir, untrusted} = await openRolloutsDir(options.stateDir, options.allowUntrusted, true)
  for (const problem of untrusted) io.warn(`--allow-untrusted: ${problem}`)
  const transport = openTransport(spec, {warn: io.warn})
  let claim: NodeClaim | undefined
  try {
    const fleet = await expectedFleet(transport, dir, {...options, warn: io.warn})
    if (fleet.expected.length === 0) throw new LocalpuppetError('no-nodes', ExitCode.failed, 'no nodes matched the discovery filters: nothing to roll out')
    const engine = new RolloutEngine(settings, fleet.expected)
    const store = RolloutStore.create(dir, {transport: spec, settings, expected: fleet.expected, expectedFrom: fleet.expectedFrom}, engine)
    // Before anything is recorded or sent: a node another live rollout drives is refused (73).
    claim = await claimNodes(dir, store.record.id, fleet.expected, options.allowUntrusted)
    const clock = options.clock ?? systemClock
    const surveyed = engine.handle({kind: 'surveyed', at: clock.now(), answers: fleet.answers})
    if (surveyed) await store.add(surveyed, engine)
    await fleet.remember()
    return await drive(engine, store, transport, clock, options, io)
  } finally {
    await claim?.release()
    await transport.close()
  }
}

/** Continues an interrupted rollout exactly where its record left it. */
export async function resumeRollout(id: string, options: RolloutOptions, io: RolloutIo): Promise<RolloutResult> {
  const {dir, untrusted} = await openRolloutsDir(options.stateDir, options.allowUntrusted)
  for (const problem of untrusted) io.warn(`--allow-untrusted: ${problem}`)
  const record = await readRolloutRecord(dir, id, options.allowUntrusted)
  const store = new RolloutStore(dir, record)
  const engine = engineFromRecord(record, store.path)
  store.assertResumable()
  const claim = await claimNodes(dir, record.id, record.expected, options.allowUntrusted)
  const fleet = openTransport(record.transport, {warn: io.warn})
  // A revert (rollout revert) starts `rollback --to`, resumed as it began.
  const transport = record.reverts ? new RollbackStarts(fleet) : fleet
  try {
    await store.claim()
    return await drive(engine, store, transport, options.clock ?? systemClock, options, io)
  } finally {
    await claim.release()
    await fleet.close()
  }
}

/** Drives a recorded rollout to its end (or its interruption), saving how it ended. */
export async function drive(engine: RolloutEngine, store: RolloutStore, transport: RolloutTransport, clock: Clock, options: RolloutOptions, io: RolloutIo): Promise<RolloutResult> {
  let outcome: 'done' | 'interrupted'
  try {
    outcome = await driveRollout(engine, transport, clock, {
      signal: options.signal,
      record: (event) => store.add(event, engine),
      progress: io.progress,
    })
  } catch (error) {
    if (error instanceof FleetUnavailableError) {
      await store.save({status: 'interrupted', interruption: error.message, exitCode: error.exitCode})
      error.suggestions.push(`the rollout is recorded: localpuppet rollout --resume ${store.record.id} continues it`)
    }

    throw error
  }

  if (outcome === 'interrupted') {
    const reason = options.signal?.reason
    const signal = typeof reason === 'string' && reason.startsWith('SIG') ? reason : 'SIGINT'
    const exitCode = signal === 'SIGTERM' ? ExitCode.sigterm : signal === 'SIGHUP' ? 129 : 130
    await store.save({status: 'interrupted', interruption: `interrupted by ${signal}`, exitCode})
    return {record: store.record, exitCode}
  }

  const exitCode = rolloutExitCode(engine)
  await store.save({status: 'done', exitCode})
  return {record: store.record, exitCode}
}
