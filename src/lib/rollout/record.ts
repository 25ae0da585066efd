import {mkdir, readdir} from 'node:fs/promises'
import {join, resolve} from 'node:path'

import {DamagedRecordError, LockHeldError, NotFoundError, UsageError} from '../errors.js'
import {newRunId} from '../state/run-id.js'
import {writeFileAtomic} from '../util/atomic-write.js'
import {readBoundedFile} from '../util/bounded-read.js'
import {stringifyJson} from '../util/json.js'
import {isProcessAlive, processStartTime} from '../util/process.js'
import {assertTrustedPaths, openedFileTrustProblem, refuseUnlessAllowed} from '../util/trusted-path.js'
import {replayEvents} from './drive.js'
import {type RolloutEvent, RolloutEngine, type RolloutState} from './engine.js'
import type {RolloutSettings} from './settings.js'
import type {TransportSpec} from './transports/index.js'

export type {TransportSpec} from './transports/index.js'

/**
 * rollouts/<id>.json in the operator's state directory, rewritten atomically after every
 * event that changed the rollout: the settings, the nodes it expects, every such event in
 * order, and the state they lead to (for `rollout show` and `list`; --resume replays the
 * events and checks they lead there).
 */
export interface RolloutRecord {
  version: 1
  id: string
  createdAt: string
  updatedAt: string
  /** The process driving it, and that process's start time (a pid reused after a crash is not it). */
  pid: number
  pidStart: string | null
  /** running while a process drives it; interrupted (Ctrl-C, a transport failure, killed): --resume continues it. */
  status: 'running' | 'interrupted' | 'done'
  transport: TransportSpec
  settings: RolloutSettings
  expected: string[]
  /** Where the expected nodes came from, for the operator. */
  expectedFrom: string
  events: RolloutEvent[]
  state: RolloutState
  /** Why it was interrupted, when it was. */
  interruption: string | null
  exitCode: number | null
  /** The rollout this one puts back (`rollout revert ID`): its starts are `rollback --to` REF. */
  reverts?: string
}

export const rolloutsDir = (stateDir: string): string => join(resolve(stateDir), 'rollouts')
const ROLLOUT_ID = /^\d{8}T\d{6}\.\d{3}Z-[0-9a-f]{4}$/
const MAX_RECORD_BYTES = 256 * 1024 * 1024

export function assertRolloutId(id: string): string {
  if (!ROLLOUT_ID.test(id)) throw new UsageError(`${JSON.stringify(id)} is not a rollout id (like 20261125T120000.000Z-1a2b): see localpuppet rollout list`)
  return id
}

/**
 * The rollouts directory, judged before anything in it is believed or written: a record
 * another user could write could name nodes and releases the operator never chose, so it is
 * refused (77), as a state dir is.
 */
export async function openRolloutsDir(stateDir: string, allowUntrusted = false, create = false): Promise<{dir: string; untrusted: string[]}> {
  const dir = rolloutsDir(stateDir)
  if (create) await mkdir(dir, {recursive: true, mode: 0o700})
  const untrusted = assertTrustedPaths([{path: dir, what: 'rollouts directory', overridable: true}], allowUntrusted)
  return {dir, untrusted}
}

export class RolloutStore {
  private writing: Promise<void> = Promise.resolve()

  constructor(
    readonly dir: string,
    readonly record: RolloutRecord,
  ) {}

  static create(dir: string, fields: Pick<RolloutRecord, 'transport' | 'settings' | 'expected' | 'expectedFrom' | 'reverts'>, engine: RolloutEngine): RolloutStore {
    const now = new Date()
    const record: RolloutRecord = {
      version: 1,
      id: newRunId(now),
      createdAt: now.toISOString(),
      updatedAt: now.toISOString(),
      pid: process.pid,
      pidStart: processStartTime(process.pid),
      status: 'running',
      ...fields,
      events: [],
      state: engine.state,
      interruption: null,
      exitCode: null,
    }
    return new RolloutStore(dir, record)
  }

  get path(): string {
    return join(this.dir, `${this.record.id}.json`)
  }

  /** Adds an event and writes the record (atomically: a reader sees the old record or the new, never half). */
  async add(event: RolloutEvent, engine: RolloutEngine): Promise<void> {
    this.record.events.push(event)
    this.record.state = engine.state
    await this.save()
  }

  async save(fields: Partial<Pick<RolloutRecord, 'status' | 'interruption' | 'exitCode'>> = {}): Promise<void> {
    Object.assign(this.record, fields, {updatedAt: new Date().toISOString()})
    const data = stringifyJson(this.record)
    // One write at a time, in order: the last one written is the newest state.
    this.writing = this.writing.then(() => writeFileAtomic(this.path, data, 0o600))
    await this.writing
  }

  /** Takes an interrupted rollout over for this process (refused while another process still drives it: 73). */
  async claim(): Promise<void> {
    this.assertResumable()
    Object.assign(this.record, {pid: process.pid, pidStart: processStartTime(process.pid)})
    await this.save({status: 'running', interruption: null, exitCode: null})
  }

  /** Refuses a finished rollout (64), and one another process still drives (73). */
  assertResumable(): void {
    const {record} = this
    if (record.status === 'done') throw new UsageError(`rollout ${record.id} is finished: nothing to resume (localpuppet rollout show ${record.id})`)
    if (record.pid !== process.pid && isProcessAlive(record.pid) && processStartTime(record.pid) === record.pidStart) {
      throw new LockHeldError(`rollout ${record.id} is being driven by process ${record.pid}: stop it first, or wait for it`, {pid: record.pid, runId: null})
    }
  }
}

/** Reads a rollout record, judged as it is opened: a file another user owns or can write is refused (77). */
export async function readRolloutRecord(dir: string, id: string, allowUntrusted = false): Promise<RolloutRecord> {
  const path = join(dir, `${assertRolloutId(id)}.json`)
  const bytes = await readRolloutsFile(path, 'rollout record', MAX_RECORD_BYTES, allowUntrusted)
  if (bytes === null) throw new NotFoundError(`no rollout ${id} in ${dir}`, ['localpuppet rollout list shows the rollouts'])

  let record: RolloutRecord
  try {
    record = JSON.parse(bytes.toString('utf8')) as RolloutRecord
  } catch (error) {
    throw new DamagedRecordError(`rollout record ${path}: not JSON (${(error as Error).message})`)
  }

  if (record?.version !== 1 || record.id !== id || !Array.isArray(record.events) || !Array.isArray(record.expected) || typeof record.settings !== 'object' || record.settings === null) {
    throw new DamagedRecordError(`rollout record ${path}: not a rollout record this localpuppet can read`)
  }

  return record
}

/**
 * A fresh engine in the state the record's events lead to. They must lead to the state the
 * record says: otherwise the record was changed by hand, or damaged, and is not resumed (65).
 */
export function engineFromRecord(record: RolloutRecord, path: string): RolloutEngine {
  const engine = new RolloutEngine(record.settings, record.expected)
  try {
    replayEvents(engine, record.events)
  } catch (error) {
    throw new DamagedRecordError(`rollout record ${path}: its events cannot be replayed (${(error as Error).message})`)
  }

  if (stringifyJson(engine.state) !== stringifyJson(record.state)) {
    throw new DamagedRecordError(`rollout record ${path}: its events do not lead to the state it records (changed by hand, or damaged): not resumed`)
  }

  return engine
}

/** Every rollout record in the directory, newest first (a damaged one is skipped, named in `skipped`). */
export async function listRolloutRecords(dir: string, allowUntrusted = false): Promise<{records: RolloutRecord[]; skipped: string[]}> {
  const names = await readdir(dir).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return [] as string[]
    throw error
  })
  const ids = names
    .filter((name) => name.endsWith('.json') && ROLLOUT_ID.test(name.slice(0, -5)))
    .map((name) => name.slice(0, -5))
    .sort()
    .reverse()
  const records: RolloutRecord[] = []
  const skipped: string[] = []
  for (const id of ids) {
    try {
      records.push(await readRolloutRecord(dir, id, allowUntrusted))
    } catch (error) {
      if (error instanceof DamagedRecordError) skipped.push(error.message)
      else throw error
    }
  }

  return {records, skipped}
}

/**
 * A file of the rollouts directory, judged as it is opened: one another user owns or can
 * write is refused (77); null when there is none.
 */
export async function readRolloutsFile(path: string, what: string, maxBytes: number, allowUntrusted = false): Promise<Buffer | null> {
  try {
    return await readBoundedFile(path, {
      maxBytes,
      label: `${what} ${path}`,
      noFollow: true,
      error: (message) => new DamagedRecordError(message),
      inspect: (info) => refuseUnlessAllowed(openedFileTrustProblem(path, info, what), {overridable: true, allow: allowUntrusted}),
    })
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null
    throw error
  }
}
