import {mkdir, readFile, readdir, unlink} from 'node:fs/promises'
import {join} from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'

import {localpuppetDir} from './install-record.js'
import {LockHeldError} from '../errors.js'
import {RunLock} from '../state/lock.js'
import {writeFileAtomic} from '../util/atomic-write.js'
import {isProcessAlive, processStartTime} from '../util/process.js'

/**
 * A run and an install of a release it uses must not overlap: the run would compile one
 * tree and apply files of another. A run announces the releases it uses in
 * `<module-dir>/.localpuppet/in-use/<run-id>.json`, then waits out an install in
 * progress; an install, holding its lock, refuses (73) to replace a release a live run
 * announced. Each side writes its own mark before looking at the other's, so one of them
 * always sees the other.
 */
interface InUseMark {
  runId: string
  pid: number
  start: string | null
  releases: string[]
}

const inUseDir = (moduleDir: string) => join(localpuppetDir(moduleDir), 'in-use')
const installLock = (moduleDir: string) => join(localpuppetDir(moduleDir), 'install.lock')

export interface MarkOptions {
  /** How long to wait for an install in progress before refusing (73). */
  waitMs?: number
}

/**
 * Announces that run `runId` uses `releases` and waits until no install is in progress.
 * Returns the function that withdraws the mark. Where the module directory cannot be
 * written (a read-only one, a user without rights), there is nothing to announce: an
 * install cannot happen there either, from that user.
 */
export async function markReleasesInUse(moduleDir: string, runId: string, releases: string[], options: MarkOptions = {}): Promise<() => Promise<void>> {
  const path = join(inUseDir(moduleDir), `${runId}.json`)
  const mark: InUseMark = {runId, pid: process.pid, start: processStartTime(process.pid), releases}
  try {
    await mkdir(inUseDir(moduleDir), {recursive: true, mode: 0o755})
    await writeFileAtomic(path, JSON.stringify(mark) + '\n', 0o644)
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === 'EACCES' || code === 'EPERM' || code === 'EROFS') return async () => {}
    throw error
  }

  const withdraw = async () => {
    await unlink(path).catch(() => {})
  }

  try {
    const until = Date.now() + (options.waitMs ?? 120_000)
    for (;;) {
      const holder = await RunLock.holderOf(installLock(moduleDir))
      if (holder === null) break
      if (Date.now() >= until) {
        throw new LockHeldError(`an install (pid ${holder.pid}) is changing ${moduleDir} since ${holder.acquiredAt}; try again once it is done`, {pid: holder.pid, runId: null})
      }

      await sleep(100)
    }
  } catch (error) {
    await withdraw()
    throw error
  }

  return withdraw
}

/**
 * Called by install with its lock held, before it replaces `releases`: refuses (73) when
 * a live run uses one of them. Marks of runs that are gone are removed.
 */
export async function assertReleasesNotInUse(moduleDir: string, releases: string[]): Promise<void> {
  if (releases.length === 0) return
  let names: string[]
  try {
    names = await readdir(inUseDir(moduleDir))
  } catch {
    return
  }

  for (const name of names.filter((n) => n.endsWith('.json'))) {
    const path = join(inUseDir(moduleDir), name)
    let mark: InUseMark
    try {
      mark = JSON.parse(await readFile(path, 'utf8')) as InUseMark
    } catch {
      continue
    }

    const alive = Number.isInteger(mark.pid) && isProcessAlive(mark.pid) && (mark.start == null || processStartTime(mark.pid) === mark.start)
    if (!alive) {
      await unlink(path).catch(() => {})
      continue
    }

    const used = releases.find((release) => Array.isArray(mark.releases) && mark.releases.includes(release))
    if (used) {
      throw new LockHeldError(`${used} is in use by run ${mark.runId} (pid ${mark.pid}); nothing was installed: install it again once the run is done`, {pid: mark.pid, runId: String(mark.runId)})
    }
  }
}
