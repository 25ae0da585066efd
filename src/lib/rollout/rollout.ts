import {FleetUnavailableError, LocalpuppetError} from '../errors.js'
import {ExitCode} from '../exit-codes.js'
import {timerDelay} from '../util/timer-delay.js'
import {type Clock, type RolloutTransport, driveRollout} from './drive.js'
import {RolloutEngine} from './engine.js'
import {type NodeClaim, claimNodes} from './exclusion.js'
import {expectedFleet} from './expected-fleet.js'
import {type RolloutRecord, RolloutStore, engineFromRecord, openRolloutsDir, readRolloutRecord} from './record.js'
import {RollbackStarts} from './revert-transport.js'
import type {RolloutSettings} from './settings.js'
import {type TransportSpec, openTransport} from './transports/index.js'

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

export const systemClock: Clock = {
  now: () => Date.now(),
  sleep: (ms, signal) =>
    new Promise((resolve) => {
      // A --soak or --deadline past 24.8 days must not fire at once: the engine looks again after the longest a timer keeps.
      const timer = setTimeout(resolve, timerDelay(ms))
      signal?.addEventListener('abort', () => (clearTimeout(timer), resolve(undefined)), {once: true})
    }),
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
  const transport = await openTransport(spec, {warn: io.warn})
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
  const fleet = await openTransport(record.transport, {warn: io.warn})
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
