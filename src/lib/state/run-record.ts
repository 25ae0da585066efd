import {readFile, readdir} from 'node:fs/promises'

import {NotFoundError} from '../errors.js'
import {writeFileAtomic} from '../util/atomic-write.js'
import {processStartTime} from '../util/process.js'
import {isRunId} from './run-id.js'
import {runFiles, runsDir} from './state-dir.js'

export type RunState = 'running' | 'succeeded' | 'failed' | 'error' | 'interrupted' | 'skipped'

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
  /** The release that ran (`foo/tags/1.4.0`). */
  release: string
  /** The reference as written in the input (`foo@^1.4`). */
  ref: string
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
  /** With --fetch: the source and what was fetched (installed or already present). */
  fetch?: {source: string; releases: Array<{release: string; status: string; bytes: number}>} | null
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
