import type {RunRecord} from './run-record.js'

/** What the node has applied (its newest run that succeeded without --noop) and how far it had drifted. */
export interface Applied {
  applied: {release: string | null; runId: string; finishedAt: string | null} | null
  drift: {count: number; runId: string; noop: boolean} | null
}

/** applied and drift, from the node's records. */
export function appliedAndDrift(records: RunRecord[]): Applied {
  let applied: Applied['applied'] = null
  let drift: Applied['drift'] = null
  for (let i = records.length - 1; i >= 0 && (applied === null || drift === null); i--) {
    const record = records[i]
    if (applied === null && record.state === 'succeeded' && !record.noop) applied = {release: record.release, runId: record.id, finishedAt: record.finishedAt}
    if (drift === null && record.resources && record.state !== 'running') {
      const count = record.noop ? record.resources.outOfSync : record.resources.correctiveChange
      if (count !== undefined) drift = {count, runId: record.id, noop: record.noop}
    }
  }

  return {applied, drift}
}
