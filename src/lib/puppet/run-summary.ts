import {readFile} from 'node:fs/promises'

import type {ResourceCounts} from './resource-counts.js'

export interface RunSummary {
  resources: ResourceCounts
  /** time.last_run: seconds since the epoch when Puppet finished. */
  lastRun: number | null
}

/**
 * Reads Puppet's last_run_summary.yaml. Returns null when Puppet did not write one
 * (a catalog that does not compile leaves none) or it cannot be read.
 */
export async function readRunSummary(path: string): Promise<RunSummary | null> {
  let doc: unknown
  try {
    // Loaded here, not at start-up: only reconciling a run reads Puppet's summary.
    const {default: yaml} = await import('js-yaml')
    doc = yaml.load(await readFile(path, 'utf8'), {schema: yaml.CORE_SCHEMA})
  } catch {
    return null
  }

  const resources = (doc as {resources?: Record<string, unknown>})?.resources
  if (!resources || typeof resources !== 'object') return null
  const count = (key: string): number => (typeof resources[key] === 'number' ? (resources[key] as number) : 0)
  const lastRun = (doc as {time?: {last_run?: unknown}}).time?.last_run
  return {
    resources: {changed: count('changed'), failed: count('failed') + count('failed_to_restart'), outOfSync: count('out_of_sync'), total: count('total')},
    lastRun: typeof lastRun === 'number' ? lastRun : null,
  }
}
