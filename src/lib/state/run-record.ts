import {open, readFile, readdir} from 'node:fs/promises'

import {DamagedRecordError, NotFoundError} from '../errors.js'
import type {LanguageMode} from '../release/language-mode.js'
import {writeFileAtomic} from '../util/atomic-write.js'
import {readBoundedFile} from '../util/bounded-read.js'
import {asIoError} from '../util/io-error.js'
import {stringifyJson} from '../util/json.js'
import type {ResourceCounts} from '../puppet/resource-counts.js'
import {readRunSummary} from '../puppet/run-summary.js'
import type {RecordedPuppet} from '../puppet/puppet-identity.js'
import {isProcessAlive, processStartTime} from '../util/process.js'
import {isRunId} from './run-id.js'
import {runFiles, runsDir} from './state-dir.js'

export type {RecordedPuppet} from '../puppet/puppet-identity.js'

/**
 * `refused`: the attempt got past argument parsing and was refused before puppet ran
 * (invalid input or release, verification, Puppet disabled, puppet missing). `busy`: it
 * found another run in progress (73 from a lock); kept as a trace, it never stands for
 * the node's state.
 */
export type RunState = 'running' | 'succeeded' | 'failed' | 'error' | 'interrupted' | 'skipped' | 'refused' | 'busy'

/** States of an attempt that ran puppet, or decided it need not (skipped): what the node last did. */
export const COMPLETED_STATES: readonly RunState[] = ['succeeded', 'failed', 'error', 'interrupted', 'skipped']

/**
 * --fetch: the source and, per release, whether it was installed or already present. When
 * the source could not be reached (69), or its index had expired, and the run used what is
 * installed instead: `releases` is empty, `error` says why, and `fallback` is true.
 */
export interface RunFetch {
  source: string
  /** The repository's identity (null: an index made before identities); absent for apt and a fallback. */
  repository?: string | null
  /** The repository index's version and expiry the fetch used (null: an index made before versions); absent for apt and a fallback (but for one refusing an expired index: when it expired). */
  indexVersion?: number | null
  indexExpires?: string | null
  /** Read through the node's own document instead of index.json: its version (milliseconds since 1970) and expiry, in place of indexVersion and indexExpires. */
  nodeDocument?: {version: number | null; expires: string | null}
  releases: Array<{release: string; status: string; bytes: number}>
  /** input_from: repository: the node's input the index listed (its node name and sha256) and whether the input file changed. */
  input?: {node: string; sha256: string; status: string}
  error?: string
  fallback?: boolean
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
  /** A layered input (see layers/): each layer merged, in order, with its digest, and the computed document it applied (replay applies it again). */
  layers?: {layers: Array<{name: string; file: string; digest: string}>; document: {classes?: Record<string, Record<string, unknown>>; parameters?: Record<string, unknown>; environment?: string}}
  noop: boolean
  allowMutable: boolean
  /** --allow-untrusted, and the trust problems it let through (state dir, module dir, releases). */
  allowUntrusted?: boolean
  untrusted?: string[]
  /** Mutable entries --allow-mutable let into a tagged release. */
  mutableEntries: string[]
  /** Tags on the modulepath that had no install record, so ran unverified (a warning). */
  unverified?: string[]
  facts: Record<string, string>
  environment: string
  manifest: string
  command: string[]
  pid: number
  /** The start time of `pid` (/proc), so that a pid reused after a crash is not taken for the run. */
  pidStart?: string | null
  /** Puppet's pid and its start time while it runs: an orphaned Puppet (localpuppet killed -9) keeps the run `running`. */
  puppetPid?: number | null
  puppetStart?: string | null
  startedAt: string
  finishedAt: string | null
  durationMs: number | null
  /** What localpuppet exited with. */
  exitCode: number | null
  /** What puppet exited with (always run with --detailed-exitcodes), or null. */
  puppetExitCode: number | null
  resources: ResourceCounts | null
  error: string | null
  /** Puppet's own first `Error:` line when the run ran Puppet (a failure's cause, without the log). */
  firstError?: string | null
  /**
   * Drift: the resources this run put back although nothing it depends on changed since the
   * previous run, which succeeded (`since`; see drift/). Their count is `resources.correctiveChange`;
   * null or absent: none, or not such a run.
   */
  corrected?: {since: string; resources: string[]} | null
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
  /**
   * With --fetch: the source, the index version used and what was fetched (installed or already present); when the
   * source could not be reached and the installed release ran instead, `error` and
   * `fallback: true` (releases empty).
   */
  fetch?: RunFetch | null
  /** Which Puppet ran (see RunPlan.puppet); null when the attempt never found one. */
  puppet?: RecordedPuppet | null
  /** How the release's code compiled (Puppet's strict settings), as passed to Puppet; null before the release was read. */
  languageMode?: LanguageMode | null
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

/**
 * Spaces after a running record (JSON allows them): room to write the final record in
 * place when the disk is full, so that a run is never left `running` for that.
 */
const RECORD_RESERVE = 16 * 1024

/**
 * Writes run.json atomically. When the disk is full, the record is rewritten in place,
 * inside the space its running version reserved; only when that fails too is it an
 * IoError (74).
 */
export async function writeRunRecord(stateDir: string, record: RunRecord): Promise<void> {
  const path = runFiles(stateDir, record.id).record
  const text = stringifyJson(record, 2) + '\n'
  try {
    await writeFileAtomic(path, record.state === 'running' ? text + ' '.repeat(RECORD_RESERVE) : text)
  } catch (error) {
    const io = asIoError(error, `run record ${path}`)
    if (!io) throw error
    if (!(await overwriteInPlace(path, text))) throw io
  }
}

/** Overwrites a file's bytes without allocating: only when `text` fits in its current size (padded with spaces). */
async function overwriteInPlace(path: string, text: string): Promise<boolean> {
  let handle
  try {
    handle = await open(path, 'r+')
    const {size} = await handle.stat()
    const bytes = Buffer.from(text)
    if (bytes.length > size) return false
    await handle.write(Buffer.concat([bytes, Buffer.alloc(size - bytes.length, ' ')]), 0, size, 0)
    await handle.sync()
    return true
  } catch {
    return false
  } finally {
    await handle?.close()
  }
}

/** A run record larger than this is damaged (a real one is a few KiB, plus its input). */
export const MAX_RECORD_BYTES = 64 * 1024 * 1024

const STATES: ReadonlySet<string> = new Set(['running', 'succeeded', 'failed', 'error', 'interrupted', 'skipped', 'refused', 'busy'])

/**
 * Reads one run's record; 66 when there is no such run, 65 naming the file when it is
 * damaged (not JSON, not a record, a link, or larger than any record could be).
 */
export async function readRunRecord(stateDir: string, runId: string): Promise<RunRecord> {
  const path = runFiles(stateDir, runId).record
  const damaged = (message: string) => new DamagedRecordError(message, [`move ${runFiles(stateDir, runId).dir} aside; other runs are not affected`])
  let bytes: Buffer
  try {
    bytes = await readBoundedFile(path, {maxBytes: MAX_RECORD_BYTES, label: `run record ${path}`, error: damaged, noFollow: true})
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') throw new NotFoundError(`no run ${runId} in ${stateDir}`)
    throw error
  }

  let record: unknown
  try {
    record = JSON.parse(bytes.toString('utf8'))
  } catch {
    throw damaged(`run record ${path}: damaged (not JSON)`)
  }

  const problem = recordProblem(record, runId)
  if (problem) throw damaged(`run record ${path}: damaged (${problem})`)
  return record as RunRecord
}

/** What makes a parsed run.json not a record of run `runId`, or null. */
function recordProblem(record: unknown, runId: string): string | null {
  if (record === null || typeof record !== 'object' || Array.isArray(record)) return `expected an object, got ${record === null ? 'null' : Array.isArray(record) ? 'a list' : typeof record}`
  const fields = record as Partial<Record<keyof RunRecord, unknown>>
  if (fields.id !== runId) return `id ${JSON.stringify(fields.id)} is not ${runId}`
  if (typeof fields.state !== 'string' || !STATES.has(fields.state)) return `state ${JSON.stringify(fields.state)}`
  if (typeof fields.startedAt !== 'string') return 'startedAt missing'
  // A refused attempt may never have resolved a release: null, never absent.
  if (typeof fields.release !== 'string' && !(fields.release === null && (fields.state === 'refused' || fields.state === 'busy'))) return 'release missing'
  if (!Number.isInteger(fields.pid)) return 'pid missing'
  return null
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
  const records = read.filter((record): record is RunRecord => record !== null)
  return Promise.all(records.map((record) => settledRecord(stateDir, record, isProcessAlive)))
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

/** When the signed document a fetch read expires: the repository's index, or the node's own document read in its place. */
export function signedExpiry(fetch: RunFetch | null | undefined): string | null | undefined {
  return fetch?.indexExpires ?? fetch?.nodeDocument?.expires
}

/** The newest run's id; 66 when there are no runs yet. */
export async function latestRunId(stateDir: string): Promise<string> {
  const ids = await listRunIds(stateDir)
  for (let i = ids.length - 1; i >= 0; i--) {
    try {
      await readFile(runFiles(stateDir, ids[i]).record)
      return ids[i]
    } catch {
      // A run directory without a readable record yet (starting, or pruned): the one before it.
    }
  }

  throw new NotFoundError(`no runs yet in ${stateDir}`)
}

/**
 * A record says `running` but its process is gone (killed -9, machine crash): show it as
 * an error without rewriting it, so a reader never waits on a run that cannot finish.
 * While the run's Puppet still lives (an orphan of a localpuppet killed -9), the run is
 * still running.
 */
export function effectiveRecord(record: RunRecord, isAlive: (pid: number) => boolean): RunRecord {
  if (record.state !== 'running' || isLive(record.pid, record.pidStart, isAlive)) return record
  if (record.puppetPid && isLive(record.puppetPid, record.puppetStart, isAlive)) return record
  return {...record, state: 'error', error: `run process ${record.pid} ended without recording a result`}
}

/**
 * effectiveRecord, and for a run whose processes are all gone, the result Puppet wrote in
 * the run's own summary (last_run_summary.yaml, newer than the run's start): a run whose
 * localpuppet was killed -9 while Puppet went on applying gets Puppet's result.
 */
export async function settledRecord(stateDir: string, record: RunRecord, isAlive: (pid: number) => boolean): Promise<RunRecord> {
  const effective = effectiveRecord(record, isAlive)
  if (record.state !== 'running' || effective.state === 'running' || !record.puppetPid) return effective
  const summary = await readRunSummary(runFiles(stateDir, record.id).summary)
  const started = Date.parse(record.startedAt)
  if (summary === null || summary.lastRun === null || summary.lastRun * 1000 < started - 1000) return effective
  const failed = summary.resources.failed > 0
  const finished = new Date(summary.lastRun * 1000)
  return {
    ...record,
    state: failed ? 'failed' : 'succeeded',
    exitCode: failed ? 1 : 0,
    resources: summary.resources,
    finishedAt: finished.toISOString(),
    durationMs: Math.max(0, finished.getTime() - started),
    error: `localpuppet (pid ${record.pid}) ended before puppet (pid ${record.puppetPid}); the result is taken from puppet's summary`,
  }
}

function isLive(pid: number, start: string | null | undefined, isAlive: (pid: number) => boolean): boolean {
  if (!isAlive(pid)) return false
  const now = start == null ? null : processStartTime(pid)
  return start == null || now === null || now === start
}
