import {readFile, readdir} from 'node:fs/promises'

import {NotFoundError} from '../errors.js'
import {writeFileAtomic} from '../util/atomic-write.js'
import {isProcessAlive, processStartTime} from '../util/process.js'
import {isRunId} from './run-id.js'
import {runFiles, runsDir} from './state-dir.js'

/**
 * `refused`: the attempt got past argument parsing and was refused before puppet ran
 * (invalid input or release, verification, Puppet disabled, puppet missing). `busy`: it
 * found another run in progress (73 from a lock); kept as a trace, it never stands for
 * the node's state.
 */
export type RunState = 'running' | 'succeeded' | 'failed' | 'error' | 'interrupted' | 'skipped' | 'refused' | 'busy'

/** States of an attempt that ran puppet, or decided it need not (skipped): what the node last did. */
export const COMPLETED_STATES: readonly RunState[] = ['succeeded', 'failed', 'error', 'interrupted', 'skipped']

export interface ResourceCounts {
  changed: number
  failed: number
  outOfSync: number
  total: number
}

/** run.json: everything a trigger needs to know about one run, written atomically. */
export interface RunRecord {
  id: string
  state: RunState
  /** The release that ran (`foo/tags/1.4.0`); null when a refused attempt never got as far as resolving it. */
  release: string | null
  /** The reference as written in the input or given with --app (`foo@^1.4`), or null when unreadable. */
  ref: string | null
  modulepath: string[]
  input: {source: string; document: Record<string, unknown>}
  inputDigest: string
  noop: boolean
  allowMutable: boolean
  /** Mutable entries --allow-mutable let into a tagged release. */
  mutableEntries: string[]
  facts: Record<string, string>
  environment: string
  manifest: string
  command: string[]
  pid: number
  /** The start time of `pid` (/proc), so that a pid reused after a crash is not taken for the run. */
  pidStart?: string | null
  startedAt: string
  finishedAt: string | null
  durationMs: number | null
  /** What localpuppet exited with. */
  exitCode: number | null
  /** What puppet exited with (always run with --detailed-exitcodes), or null. */
  puppetExitCode: number | null
  resources: ResourceCounts | null
  error: string | null
  /** Why a run was skipped (--if-changed), or null. */
  reason: string | null
  /** What the run depends on (see runFingerprint); --if-changed compares it. */
  fingerprint: string | null
  /** The random wait before taking the lock (--splay), in seconds, or null. */
  splaySeconds: number | null
  log: string
  /** The arguments given after `--`, as passed to puppet (replay repeats them). */
  puppetArgs?: string[]
  /** sha256 of the manifest applied (a copy is kept in the run directory for replay), or null for the empty one. */
  manifestDigest?: string | null
  /** The run this one replays (apply --replay, rollback), or null. */
  replayOf?: string | null
  /** --save: the input file whose app was rewritten to this run's release, or null. */
  saved?: string | null
  /** With --fetch: the source and what was fetched (installed or already present). */
  fetch?: {source: string; releases: Array<{release: string; status: string; bytes: number}>} | null
}

/** A record of an attempt just started by this process, with `fields` set and everything unknown empty. */
export function newRunRecord(id: string, log: string, started: Date, fields: Partial<RunRecord>): RunRecord {
  return {
    id,
    state: 'running',
    release: null,
    ref: null,
    modulepath: [],
    input: {source: '-', document: {}},
    inputDigest: '',
    noop: false,
    allowMutable: false,
    mutableEntries: [],
    facts: {},
    environment: 'production',
    manifest: '',
    command: [],
    pid: process.pid,
    pidStart: processStartTime(process.pid),
    startedAt: started.toISOString(),
    finishedAt: null,
    durationMs: null,
    exitCode: null,
    puppetExitCode: null,
    resources: null,
    error: null,
    reason: null,
    fingerprint: null,
    splaySeconds: null,
    log,
    puppetArgs: [],
    manifestDigest: null,
    replayOf: null,
    saved: null,
    ...fields,
  }
}

export async function writeRunRecord(stateDir: string, record: RunRecord): Promise<void> {
  await writeFileAtomic(runFiles(stateDir, record.id).record, JSON.stringify(record, null, 2) + '\n')
}

/** Reads one run's record; 66 when there is no such run. */
export async function readRunRecord(stateDir: string, runId: string): Promise<RunRecord> {
  let text: string
  try {
    text = await readFile(runFiles(stateDir, runId).record, 'utf8')
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') throw new NotFoundError(`no run ${runId} in ${stateDir}`)
    throw error
  }

  return JSON.parse(text) as RunRecord
}

/** Run ids that have a record, oldest first (ids sort by start time). */
export async function listRunIds(stateDir: string): Promise<string[]> {
  let names: string[]
  try {
    names = await readdir(runsDir(stateDir))
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return []
    throw error
  }

  return names.filter((name) => isRunId(name)).sort()
}

/**
 * Every readable record, oldest first, as effectiveRecord shows it. A directory whose
 * record is missing or damaged is passed over.
 */
export async function readRunRecords(stateDir: string): Promise<RunRecord[]> {
  const read = await Promise.all((await listRunIds(stateDir)).map((id) => readRunRecord(stateDir, id).catch(() => null)))
  return read.filter((record): record is RunRecord => record !== null && typeof record === 'object' && typeof record.state === 'string').map((record) => effectiveRecord(record, isProcessAlive))
}

/** When a record's attempt ended (or started, while it runs): what "newest" means across runs. */
export function recordTime(record: Pick<RunRecord, 'finishedAt' | 'startedAt'>): string {
  return record.finishedAt ?? record.startedAt ?? ''
}

/** The newest of the records that pass `filter`, by when they ended. */
export function newestRecord(records: RunRecord[], filter: (record: RunRecord) => boolean): RunRecord | null {
  let newest: RunRecord | null = null
  for (const record of records) if (filter(record) && (newest === null || recordTime(record) >= recordTime(newest))) newest = record
  return newest
}

/** The newest run's id; 66 when there are no runs yet. */
export async function latestRunId(stateDir: string): Promise<string> {
  const ids = await listRunIds(stateDir)
  for (let i = ids.length - 1; i >= 0; i--) {
    try {
      await readFile(runFiles(stateDir, ids[i]).record)
      return ids[i]
    } catch {}
  }

  throw new NotFoundError(`no runs yet in ${stateDir}`)
}

/**
 * A record says `running` but its process is gone (killed -9, machine crash): show it as
 * an error without rewriting it, so a reader never waits on a run that cannot finish.
 */
export function effectiveRecord(record: RunRecord, isAlive: (pid: number) => boolean): RunRecord {
  const reused = record.pidStart != null && processStartTime(record.pid) !== null && processStartTime(record.pid) !== record.pidStart
  if (record.state !== 'running' || (isAlive(record.pid) && !reused)) return record
  return {...record, state: 'error', error: `run process ${record.pid} ended without recording a result`}
}
