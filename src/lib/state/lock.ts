import {randomBytes} from 'node:crypto'
import {link, readFile, rename, unlink, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import {LockHeldError} from '../errors.js'
import {writeFileAtomic} from '../util/atomic-write.js'
import {isProcessAlive, processStartTime} from '../util/process.js'

interface LockContent {
  pid: number
  /** /proc start time of pid, so a reused pid is not mistaken for the holder. */
  start: string | null
  runId: string | null
  acquiredAt: string
  token: string
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

  /** Takes the lock or throws LockHeldError (73) naming the run that holds it. */
  static async acquire(stateDir: string, runId: string | null): Promise<RunLock> {
    const path = lockPath(stateDir)
    const content: LockContent = {
      pid: process.pid,
      start: processStartTime(process.pid),
      runId,
      acquiredAt: new Date().toISOString(),
      token: randomBytes(8).toString('hex'),
    }
    const temp = `${path}.${process.pid}.${content.token}`
    await writeFile(temp, JSON.stringify(content) + '\n', {mode: 0o600})
    try {
      for (let attempt = 0; attempt < 10; attempt++) {
        try {
          await link(temp, path)
          return new RunLock(path, content)
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
        }

        const holder = await readLock(path)
        if (holder === undefined) continue
        if (holder !== null && isHolderAlive(holder)) {
          const run = holder.runId ? `run ${holder.runId}` : 'a run'
          throw new LockHeldError(`${run} (pid ${holder.pid}) holds the lock ${path} since ${holder.acquiredAt}`, {pid: holder.pid, runId: holder.runId})
        }

        await takeOverStale(path, holder)
      }

      throw new LockHeldError(`could not take the lock ${path}: it keeps changing hands`, {pid: 0, runId: null})
    } finally {
      await unlink(temp).catch(() => {})
    }
  }

  /** Records which run holds the lock (and, for detached runs, which process). */
  async update(fields: {runId?: string; pid?: number}): Promise<void> {
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
  let text: string
  try {
    text = await readFile(path, 'utf8')
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined
    throw error
  }

  try {
    const parsed = JSON.parse(text) as LockContent
    return Number.isInteger(parsed.pid) ? parsed : null
  } catch {
    return null
  }
}

function isHolderAlive(holder: LockContent): boolean {
  if (!isProcessAlive(holder.pid)) return false
  const start = processStartTime(holder.pid)
  return holder.start === null || start === null || start === holder.start
}

/**
 * Moves a stale lock aside. If what was moved turns out not to be the stale lock we
 * judged (another process took over and locked in between), it is put back.
 */
async function takeOverStale(path: string, judged: LockContent | null): Promise<void> {
  const aside = `${path}.stale.${process.pid}.${randomBytes(4).toString('hex')}`
  try {
    await rename(path, aside)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return
    throw error
  }

  const moved = await readLock(aside)
  if (moved && judged && moved.token !== judged.token) await link(aside, path).catch(() => {})
  await unlink(aside).catch(() => {})
}
