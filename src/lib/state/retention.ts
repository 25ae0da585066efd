import {rm} from 'node:fs/promises'

import {isProcessAlive} from '../util/process.js'
import {type RunRecord, effectiveRecord, listRunIds, newestRecord, readRunRecord, readRunRecords} from './run-record.js'
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
 * The newest run other than `runId` that ran puppet, by when it ended: what --if-changed
 * compares with. Skipped runs are passed over (they ran nothing), and so are attempts that
 * were refused or found another run in progress: the node is as the run before them left it.
 */
export async function previousRun(stateDir: string, runId: string): Promise<RunRecord | null> {
  const records = await readRunRecords(stateDir)
  return newestRecord(records, (record) => record.id !== runId && ['succeeded', 'failed', 'error', 'interrupted'].includes(record.state))
}
