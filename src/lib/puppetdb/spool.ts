import {type Stats, constants} from 'node:fs'
import {InputError} from '../errors.js'
import {lstat, mkdir, open, readdir, unlink} from 'node:fs/promises'
import {join} from 'node:path'

import {atomicTempWriter, writeFileAtomic} from '../util/atomic-write.js'
import {asIoError} from '../util/io-error.js'
import {readBoundedFile} from '../util/bounded-read.js'
import {isProcessAlive, processStartTime} from '../util/process.js'
import {findTrustProblem, openedFileTrustProblem, refuseUnlessAllowed} from '../util/trusted-path.js'
import type {PuppetDbClient, PuppetDbCommand} from './client.js'

/**
 * The node's spool of PuppetDB commands: one file per command, named so that their order
 * is the order they were made in, each written atomically (fsynced, then renamed) like the
 * rest of the state directory. A command leaves the spool only once PuppetDB accepted it.
 *
 * The bound: at most MAX_SPOOLED commands and MAX_SPOOL_BYTES. Facts and a catalog are
 * each replaced by the next run's (PuppetDB keeps only a node's newest anyway), so what
 * piles up while PuppetDB is away is reports: past the bound the oldest are dropped, and
 * counted (`dropped`), never silently.
 */
export const MAX_SPOOLED = 1000
export const MAX_SPOOL_BYTES = 256 * 1024 * 1024
/** The largest spooled command read back: a catalog of some 100,000 resources. */
const MAX_COMMAND_BYTES = 128 * 1024 * 1024

const NAME = /^(\d{15})-(\d{1,10})-(\d{4})-(report|facts|catalog)\.json$/
const KIND: Record<PuppetDbCommand['command'], string> = {'store report': 'report', 'replace facts': 'facts', 'replace catalog': 'catalog'}

export function spoolDir(stateDir: string): string {
  return join(stateDir, 'puppetdb-spool')
}

/**
 * The spool directory, made if missing, refused (77) when another user owns it or others can
 * write it: root sends what it holds to PuppetDB as this node, so whoever could write there
 * could report any run, for any node, under this node's certificate.
 */
async function trustedSpoolDir(stateDir: string): Promise<string> {
  const dir = spoolDir(stateDir)
  await mkdir(dir, {recursive: true, mode: 0o700})
  refuseUnlessAllowed(findTrustProblem(dir, {what: 'PuppetDB spool', ancestors: false}), {overridable: false})
  return dir
}

interface Entry {
  name: string
  kind: string
  size: number
}

async function entries(dir: string): Promise<Entry[]> {
  let names: string[]
  try {
    names = await readdir(dir)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return []
    throw error
  }

  const found: Entry[] = []
  for (const name of names.filter((name) => NAME.test(name)).sort()) {
    // A link is listed (never followed): the flush drops it, and counts it.
    const info = await lstat(join(dir, name)).catch(() => null)
    if (info?.isFile() || info?.isSymbolicLink()) found.push({name, kind: NAME.exec(name)![4], size: info.size})
  }

  return found
}

let sequence = 0

/**
 * Adds a run's commands to the spool, in order, all or none: one that cannot be written (a
 * full disk) takes back those of the run already written and throws, the commands spooled
 * before left as they were. A spooled facts or catalog command the new one supersedes is
 * removed only once the new one is in place. Returns how many reports the bound dropped.
 */
export async function spoolCommands(stateDir: string, commands: PuppetDbCommand[], bound = {count: MAX_SPOOLED, bytes: MAX_SPOOL_BYTES}): Promise<number> {
  const dir = await trustedSpoolDir(stateDir)
  const now = Date.now()
  const written: Entry[] = []
  try {
    for (const command of commands) {
      const kind = KIND[command.command]
      const name = `${String(now).padStart(15, '0')}-${process.pid}-${String(sequence++ % 10_000).padStart(4, '0')}-${kind}.json`
      await writeFileAtomic(join(dir, name), JSON.stringify(command) + '\n')
      written.push({name, kind, size: 0})
    }
  } catch (error) {
    for (const entry of written) await unlink(join(dir, entry.name)).catch(() => {})
    throw error
  }

  const superseded = new Map(written.filter((entry) => entry.kind !== 'report').map((entry) => [entry.kind, entry.name]))
  for (const old of await entries(dir)) {
    const newer = superseded.get(old.kind)
    if (newer !== undefined && old.name < newer) await unlink(join(dir, old.name)).catch(() => {})
  }

  return enforceBound(dir, bound)
}

async function enforceBound(dir: string, bound: {count: number; bytes: number}): Promise<number> {
  const all = await entries(dir)
  let count = all.length
  let bytes = all.reduce((sum, entry) => sum + entry.size, 0)
  let dropped = 0
  for (const entry of all) {
    if (count <= bound.count && bytes <= bound.bytes) break
    if (entry.kind !== 'report') continue
    await unlink(join(dir, entry.name)).catch(() => {})
    count--
    bytes -= entry.size
    dropped++
  }

  if (dropped > 0) await addDropped(dir, dropped)
  return dropped
}

async function addDropped(dir: string, more: number): Promise<void> {
  const file = join(dir, 'dropped')
  const before = await readDropped(dir)
  await writeFileAtomic(file, `${before + more}\n`)
}

async function readDropped(dir: string): Promise<number> {
  try {
    const value = Number((await readBoundedFile(join(dir, 'dropped'), {maxBytes: 64, label: 'dropped', error: (message) => new InputError(message)})).toString('utf8').trim())
    return Number.isSafeInteger(value) && value >= 0 ? value : 0
  } catch {
    return 0
  }
}

export interface FlushResult {
  /** Commands PuppetDB accepted, in order. */
  sent: Array<{command: string; certname: string; producerTimestamp: string}>
  /** Commands still spooled. */
  pending: number
  /** Reports the bound ever dropped. */
  dropped: number
  /** Commands PuppetDB refused for themselves (400, 413: the next one was accepted), dropped and counted: what, and PuppetDB's reason. */
  refused: string[]
  /** Why the flush stopped before the spool was empty (PuppetDB unreachable, the time given ran out), or null. */
  error: string | null
  /** Another process was flushing: nothing was sent by this one. */
  busy: boolean
}

/**
 * Sends the spool in order, oldest first, each command removed once PuppetDB accepted it;
 * stops at the first failure (the order is kept) or when `deadlineMs` is spent. One flush at
 * a time: a flush that finds another running (a live pid in the lock) sends nothing.
 */
export async function flushSpool(stateDir: string, client: PuppetDbClient, options: {deadlineMs: number; timeoutMs: number; signal?: AbortSignal}): Promise<FlushResult> {
  const dir = await trustedSpoolDir(stateDir)
  const result: FlushResult = {sent: [], pending: 0, dropped: await readDropped(dir), refused: [], error: null, busy: false}
  const release = await takeLock(dir)
  if (typeof release === 'number') {
    result.busy = true
    result.error = `another flush (pid ${release}) is sending; if no localpuppet runs as pid ${release}, remove ${join(dir, 'flush.lock')}`
    result.pending = (await entries(dir)).length
    return result
  }

  try {
    await removeLeftTemps(dir)
    const end = Date.now() + options.deadlineMs
    const queue = await entries(dir)
    // A command PuppetDB refused as a bad request: skipped once, judged by the next one (accepted: it was this command's fault, dropped; refused too: PuppetDB's or the setting's, nothing dropped).
    let suspect: {path: string; why: string} | null = null
    for (const [index, entry] of queue.entries()) {
      const left = end - Date.now()
      if (left <= 0) {
        result.error = `${queue.length - index} left unsent: the ${Math.round(options.deadlineMs / 1000)} s given to sending ran out`
        break
      }

      const path = join(dir, entry.name)
      let command: PuppetDbCommand
      try {
        const inspect = (info: Stats) => {
          const problem = openedFileTrustProblem(path, info, 'spooled command')
          if (problem) throw new InputError(problem.message)
        }

        command = spooledCommand(JSON.parse((await readBoundedFile(path, {maxBytes: MAX_COMMAND_BYTES, label: `spooled command ${path}`, error: (message) => new InputError(message), noFollow: true, inspect})).toString('utf8')))
      } catch (error) {
        // Gone meanwhile: a newer run's facts or catalog replaced it.
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') continue
        // A file this process cannot read back or that is no command (cut short by a crash before its rename cannot be: damaged by hand), a link, a file others could write: dropped and counted, never sent.
        await unlink(path).catch(() => {})
        await addDropped(dir, 1)
        result.dropped++
        continue
      }

      try {
        await client.submit(command, {timeoutMs: Math.min(options.timeoutMs, left), deadlineMs: left}, options.signal)
      } catch (error) {
        const status = (error as {httpStatus?: number}).httpStatus
        if (suspect === null && (status === 400 || status === 413)) {
          suspect = {path, why: `${command.command} of ${command.certname} at ${command.producerTimestamp}: ${(error as Error).message}`}
          continue
        }

        result.error = (suspect?.why ?? (error as Error).message)
        break
      }

      if (suspect) {
        await unlink(suspect.path).catch(() => {})
        await addDropped(dir, 1)
        result.dropped++
        result.refused.push(suspect.why)
        suspect = null
      }

      // A newer run's facts or catalog may have replaced it meanwhile: sent either way.
      await unlink(path).catch((error: NodeJS.ErrnoException) => {
        if (error.code !== 'ENOENT') throw error
      })
      result.sent.push({command: command.command, certname: command.certname, producerTimestamp: command.producerTimestamp})
    }

    // Refused, and nothing after it to tell whose fault: kept, and said.
    if (suspect && result.error === null) result.error = suspect.why
    result.pending = (await entries(dir)).length
    return result
  } finally {
    await release()
  }
}

/** A spooled file's JSON as a command, or throws: a file that is not one (null, a field missing) would otherwise stop every later flush at the head of the line. */
function spooledCommand(data: unknown): PuppetDbCommand {
  const command = data as Partial<PuppetDbCommand> | null
  const payload = command?.payload as unknown
  if (
    command === null ||
    typeof command !== 'object' ||
    !Object.hasOwn(KIND, String(command.command)) ||
    !Number.isSafeInteger(command.version) ||
    typeof command.certname !== 'string' ||
    typeof command.producerTimestamp !== 'string' ||
    payload === null ||
    typeof payload !== 'object' ||
    Array.isArray(payload)
  )
    throw new InputError('not a spooled command')
  return command as PuppetDbCommand
}

/** Removes the temporary files of writers that are gone (a run killed while spooling): uncounted by the bound, they would pile up, one per crash. */
async function removeLeftTemps(dir: string): Promise<void> {
  for (const name of await readdir(dir)) {
    const writer = atomicTempWriter(name)
    if (writer !== null && writer !== process.pid && !isProcessAlive(writer)) await unlink(join(dir, name)).catch(() => {})
  }
}

/** How many commands are spooled, and how many reports were ever dropped. */
export async function spoolState(stateDir: string): Promise<{pending: number; dropped: number}> {
  const dir = spoolDir(stateDir)
  return {pending: (await entries(dir)).length, dropped: await readDropped(dir)}
}

/**
 * The flush lock: a file holding the flushing pid and its start time, taken over when that
 * process is gone (a pid reused after a reboot is another process: its start time differs).
 * Returns the release, or the pid of the live holder.
 */
async function takeLock(dir: string): Promise<(() => Promise<void>) | number> {
  const path = join(dir, 'flush.lock')
  let holder = 0
  for (let tries = 0; tries < 2; tries++) {
    try {
      const handle = await open(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600)
      try {
        await handle.writeFile(`${process.pid} ${processStartTime(process.pid) ?? ''}\n`)
      } catch (error) {
        // A full disk: no empty lock left behind, and the lock named (74).
        await handle.close()
        await unlink(path).catch(() => {})
        throw asIoError(error, `PuppetDB spool lock ${path}`) ?? error
      }

      await handle.close()
      return () => unlink(path).catch(() => {})
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
      const [pidText, start] = (await readBoundedFile(path, {maxBytes: 64, label: 'flush lock', error: (message) => new InputError(message)}).catch(() => Buffer.from(''))).toString('utf8').trim().split(/\s+/)
      holder = Number(pidText)
      const now = Number.isSafeInteger(holder) && holder > 0 ? processStartTime(holder) : null
      if (Number.isSafeInteger(holder) && holder > 0 && isProcessAlive(holder) && (!start || now === null || now === start)) return holder
      await unlink(path).catch(() => {})
    }
  }

  return holder
}
