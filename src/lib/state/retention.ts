import {rm} from 'node:fs/promises'

import {isProcessAlive} from '../util/process.js'
import {type RunRecord, effectiveRecord, listRunIds, readRunRecord} from './run-record.js'
import {runDir} from './state-dir.js'

/**
 * Keeps the newest `keep` run directories and removes older ones, never one whose run
 * is still going. Called with the run lock held.
 */
export async function pruneRuns(stateDir: string, keep: number): Promise<string[]> {
  const ids = await listRunIds(stateDir)
  const removed: string[] = []
  for (const id of ids.slice(0, Math.max(0, ids.length - keep))) {
    const record = await readRunRecord(stateDir, id).catch(() => null)
    // No record yet may be a run just starting (--splay writes its directory first).
    if (!record || effectiveRecord(record, isProcessAlive).state === 'running') continue
    await rm(runDir(stateDir, id), {recursive: true, force: true})
    removed.push(id)
  }

  return removed
}

/**
 * The newest run before `runId` that actually ran or tried to (skipped runs are passed
 * over): what --if-changed compares with.
 */
export async function previousRun(stateDir: string, runId: string): Promise<RunRecord | null> {
  const ids = (await listRunIds(stateDir)).filter((id) => id < runId)
  for (let i = ids.length - 1; i >= 0; i--) {
    const record = await readRunRecord(stateDir, ids[i]).catch(() => null)
    if (!record) continue
    const effective = effectiveRecord(record, isProcessAlive)
    if (effective.state !== 'skipped') return effective
  }

  return null
}
