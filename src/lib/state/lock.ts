import {randomBytes} from 'node:crypto'
import {link, readFile, unlink, writeFile} from 'node:fs/promises'
import {join} from 'node:path'
import {setTimeout as delay} from 'node:timers/promises'

import {LockHeldError} from '../errors.js'
import {asIoError} from '../util/io-error.js'
import {writeFileAtomic} from '../util/atomic-write.js'
import {isProcessAlive, processStartTime} from '../util/process.js'

interface LockContent {
  pid: number
  /** /proc start time of pid, so a reused pid is not mistaken for the holder. */
  start: string | null
  runId: string | null
  acquiredAt: string
  token: string
  /** Puppet's pid (and process group) while it runs: the lock is held while puppet lives. */
  group?: number
}

export function lockPath(stateDir: string): string {
  return join(stateDir, 'lock')
}

/**
 * One run at a time per state directory. The lock file appears atomically (link(2) of a
 * complete temp file, which fails if it exists); a lock whose process is gone is taken over.
 */
export class RunLock {
  private constructor(
    private readonly path: string,
    private content: LockContent,
  ) {}

  /** Takes the state directory's run lock or throws LockHeldError (73) naming the run that holds it. */
  static async acquire(stateDir: string, runId: string | null): Promise<RunLock> {
    return RunLock.acquireFile(lockPath(stateDir), runId)
  }

  /** Takes the lock file at `path` (e.g. a module directory's install lock). */
  static async acquireFile(path: string, runId: string | null): Promise<RunLock> {
    const content: LockContent = {
      pid: process.pid,
      start: processStartTime(process.pid),
      runId,
      acquiredAt: new Date().toISOString(),
      token: randomBytes(8).toString('hex'),
    }
    const temp = `${path}.${process.pid}.${content.token}`
    try {
      // Inside the try: a full disk creates the file and then fails to write it.
      await writeFile(temp, JSON.stringify(content) + '\n', {mode: 0o600}).catch((error: unknown) => {
        // A full disk names the lock it could not take (74), not just "no space".
        throw asIoError(error, `lock ${path}`) ?? error
      })
      // Enough rounds to wait out another process's takeover of a stale lock.
      for (let attempt = 0; attempt < 100; attempt++) {
        try {
          await link(temp, path)
          return new RunLock(path, content)
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
        }

        const text = await readLockText(path)
        if (text === undefined) continue
        const holder = parseLock(text)
        if (holder !== null && isHolderAlive(holder)) {
          const run = holder.runId ? `run ${holder.runId}` : 'a run'
          throw new LockHeldError(`${run} (pid ${holder.pid}) holds the lock ${path} since ${holder.acquiredAt}`, {pid: holder.pid, runId: holder.runId})
        }

        await takeOverStale(path, temp, text)
      }

      throw new LockHeldError(`could not take the lock ${path}: it keeps changing hands`, {pid: 0, runId: null})
    } finally {
      await unlink(temp).catch(() => {})
    }
  }

  /** Takes the lock file at `path`, waiting up to `waitMs` (with jittered backoff) for a holder to let go. */
  static async acquireFileWaiting(path: string, waitMs: number): Promise<RunLock> {
    const until = Date.now() + waitMs
    for (let wait = 20; ; wait = Math.min(wait * 2, 500)) {
      try {
        return await RunLock.acquireFile(path, null)
      } catch (error) {
        if (!(error instanceof LockHeldError) || Date.now() > until) throw error
        await delay(wait + Math.random() * wait)
      }
    }
  }

  /** Who holds the state directory's run lock now, or null when nobody alive does. */
  static async holder(stateDir: string): Promise<{pid: number; runId: string | null; acquiredAt: string} | null> {
    return RunLock.holderOf(lockPath(stateDir))
  }

  /** Who holds the lock file at `path` (e.g. a module directory's install lock), or null. */
  static async holderOf(path: string): Promise<{pid: number; runId: string | null; acquiredAt: string} | null> {
    const holder = await readLock(path)
    return holder && isHolderAlive(holder) ? {pid: holder.pid, runId: holder.runId, acquiredAt: holder.acquiredAt} : null
  }

  /** Records which run holds the lock (and, for detached runs, which process). */
  async update(fields: {runId?: string; pid?: number; group?: number}): Promise<void> {
    const pid = fields.pid ?? this.content.pid
    this.content = {...this.content, ...fields, pid, start: fields.pid ? processStartTime(pid) : this.content.start}
    await writeFileAtomic(this.path, JSON.stringify(this.content) + '\n')
  }

  /** Removes the lock if it is still ours. */
  async release(): Promise<void> {
    const current = await readLock(this.path)
    if (current && current.token === this.content.token) await unlink(this.path).catch(() => {})
  }
}

/** The lock's content; null when unreadable garbage, undefined when it vanished meanwhile. */
async function readLock(path: string): Promise<LockContent | null | undefined> {
  const text = await readLockText(path)
  return text === undefined ? undefined : parseLock(text)
}

async function readLockText(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, 'utf8')
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined
    throw error
  }
}

function parseLock(text: string): LockContent | null {
  try {
    const parsed = JSON.parse(text) as LockContent
    return Number.isInteger(parsed.pid) ? parsed : null
  } catch {
    return null
  }
}

function isHolderAlive(holder: LockContent): boolean {
  if (holder.group !== undefined && isGroupAlive(holder.group)) return true
  if (!isProcessAlive(holder.pid)) return false
  const start = processStartTime(holder.pid)
  return holder.start === null || start === null || start === holder.start
}

/**
 * Puppet itself (its group's leader) is still running. Not any process of its group: a
 * daemon a manifest started without its own session must not hold the lock forever.
 */
function isGroupAlive(group: number): boolean {
  return Number.isInteger(group) && group > 1 && isProcessAlive(group)
}

/**
 * Removes a stale lock. One process at a time may: the one whose link(2) creates the
 * takeover marker. It removes the lock only if the file still holds exactly the text judged
 * stale, and nothing else can replace that file while it exists (a link needs the name
 * free; only the marker's holder unlinks a stale lock), so a lock another process has
 * taken meanwhile is never removed. Moving the lock aside instead let a third process
 * link its lock while a live one was out of place: two holders.
 */
async function takeOverStale(path: string, temp: string, judged: string): Promise<void> {
  const marker = `${path}.takeover`
  try {
    await link(temp, marker)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
    // Someone else is taking over: let them finish, unless they died doing so.
    const other = await readLock(marker)
    if (other === undefined) return
    if (other === null || !isHolderAlive(other)) await unlink(marker).catch(() => {})
    else await delay(10)
    return
  }

  try {
    if ((await readLockText(path)) === judged) await unlink(path).catch(() => {})
  } finally {
    await unlink(marker).catch(() => {})
  }
}
