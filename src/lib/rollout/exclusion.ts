import {join} from 'node:path'

import {DamagedRecordError, LockHeldError} from '../errors.js'
import {RunLock} from '../state/lock.js'
import {writeFileAtomic} from '../util/atomic-write.js'
import {stringifyJson} from '../util/json.js'
import {isProcessAlive, processStartTime} from '../util/process.js'
import {readRolloutsFile} from './record.js'

/*
 * One live rollout per node, as Nomad allows one active deployment per job: two rollouts
 * over the same node each meet the other's runs as busy, retry, and each reports success
 * while the node ends on whichever ran last. rollouts/active.json lists the live rollouts
 * and the nodes each drives; it is read and rewritten only while holding rollouts/active.lock
 * (the run lock's link(2) file, whose holder that died is taken over), so that the check and
 * the claim are one step: two rollouts started at the same moment cannot both pass. An entry
 * whose process is gone (killed, crashed: its pid not alive with the same start time) no
 * longer counts.
 */

interface ActiveEntry {
  id: string
  pid: number
  pidStart: string | null
  nodes: string[]
  since: string
}

type Active = Record<string, ActiveEntry>

/** Long enough to wait out another rollout's claim or release (each a read and a write). */
const LOCK_WAIT_MS = 30_000
const MAX_ACTIVE_BYTES = 64 * 1024 * 1024

/** The nodes a rollout holds until it releases them (or its process ends). */
export interface NodeClaim {
  release(): Promise<void>
}

const alive = (entry: ActiveEntry): boolean => isProcessAlive(entry.pid) && (entry.pidStart === null || processStartTime(entry.pid) === entry.pidStart)

/**
 * Claims `nodes` for rollout `id` in this process, or throws LockHeldError (73) naming the
 * live rollout that drives some of them.
 */
export async function claimNodes(dir: string, id: string, nodes: string[], allowUntrusted = false): Promise<NodeClaim> {
  const mine: ActiveEntry = {id, pid: process.pid, pidStart: processStartTime(process.pid), nodes: [...nodes].sort(), since: new Date().toISOString()}
  await underLock(dir, allowUntrusted, (active) => {
    const wanted = new Set(nodes)
    for (const entry of Object.values(active)) {
      const shared = entry.nodes.filter((node) => wanted.has(node))
      if (entry.id === id) {
        throw new LockHeldError(`rollout ${id} is being driven by process ${entry.pid}: stop it first, or wait for it`, {pid: entry.pid, runId: null})
      }

      if (shared.length > 0) {
        const named = `${shared.slice(0, 5).join(', ')}${shared.length > 5 ? ` and ${shared.length - 5} more` : ''}`
        throw new LockHeldError(
          `rollout ${entry.id} (process ${entry.pid}, since ${entry.since}) is driving ${named}: one rollout at a time over a node; wait for it to end, or stop it (Ctrl-C) and resume it later`,
          {pid: entry.pid, runId: null},
        )
      }
    }

    active[id] = mine
  })
  let released = false
  return {
    async release() {
      if (released) return
      released = true
      await underLock(dir, allowUntrusted, (active) => {
        if (active[id]?.pid === mine.pid && active[id]?.pidStart === mine.pidStart) delete active[id]
      })
    },
  }
}

/** Runs `change` on the live entries (the dead ones dropped) while holding the lock, and writes what it leaves. */
async function underLock(dir: string, allowUntrusted: boolean, change: (active: Active) => void): Promise<void> {
  const lock = await RunLock.acquireFileWaiting(join(dir, 'active.lock'), LOCK_WAIT_MS)
  try {
    const active = await readActive(dir, allowUntrusted)
    for (const [key, entry] of Object.entries(active)) if (!alive(entry)) delete active[key]
    change(active)
    await writeFileAtomic(join(dir, 'active.json'), stringifyJson(active, 2), 0o600)
  } finally {
    await lock.release()
  }
}

async function readActive(dir: string, allowUntrusted: boolean): Promise<Active> {
  const path = join(dir, 'active.json')
  const bytes = await readRolloutsFile(path, 'live rollouts file', MAX_ACTIVE_BYTES, allowUntrusted)
  if (bytes === null) return {}
  let parsed: unknown
  try {
    parsed = JSON.parse(bytes.toString('utf8'))
  } catch (error) {
    // Rewritten whole and atomically: damaged only by hand. Which rollouts are live is then unknown.
    throw new DamagedRecordError(`live rollouts file ${path}: not JSON (${(error as Error).message}): remove it once no rollout is running`)
  }

  const active: Active = {}
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) return active
  for (const [key, value] of Object.entries(parsed as Record<string, unknown>)) {
    const entry = value as Partial<ActiveEntry> | null
    if (entry && typeof entry.id === 'string' && Number.isInteger(entry.pid) && Array.isArray(entry.nodes) && entry.nodes.every((node) => typeof node === 'string')) {
      active[key] = {id: entry.id, pid: entry.pid!, pidStart: typeof entry.pidStart === 'string' ? entry.pidStart : null, nodes: entry.nodes, since: typeof entry.since === 'string' ? entry.since : '?'}
    }
  }

  return active
}
