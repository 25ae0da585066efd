import {createHash} from 'node:crypto'
import {closeSync, openSync, writeSync} from 'node:fs'
import {copyFile, mkdir, readFile, writeFile} from 'node:fs/promises'
import {join} from 'node:path'
import {StringDecoder} from 'node:string_decoder'
import {setTimeout as sleep} from 'node:timers/promises'

import {renderEncScript} from '../enc/exec-enc.js'
import {InterruptedError, LocalpuppetError, LockHeldError, PuppetDisabledError, PuppetUnavailableError, TimeoutError} from '../errors.js'
import {ExitCode} from '../exit-codes.js'
import {assertEnabled, holdCatalogRunLock} from '../puppet/puppet-locks.js'
import {type PuppetLockPaths, puppetLockPaths} from '../puppet/puppet-paths.js'
import {readRunSummary} from '../puppet/run-summary.js'
import {markReleasesInUse} from '../install/in-use.js'
import {RunLock, lockPath} from '../state/lock.js'
import {pruneRuns, previousRun} from '../state/retention.js'
import {formatAge} from '../util/duration.js'
import {asIoError} from '../util/io-error.js'
import {processStartTime} from '../util/process.js'
import type {ResourceCounts} from '../puppet/resource-counts.js'
import {type RunRecord, type RunState, newRunRecord, writeRunRecord} from '../state/run-record.js'
import {manifestCopyPath, runsDir} from '../state/state-dir.js'
import {DEFAULT_KEEP, DEFAULT_MAX_AGE_MS} from './defaults.js'
import {type ChildExit, startChild} from '../util/child.js'
import {runFingerprint} from './fingerprint.js'
import {runFinishHook} from './finish-hook.js'
import type {RunPlan} from './run-plan.js'
import {timerDelay} from '../util/timer-delay.js'

/** How a run record's error begins when the run succeeded but --save could not rewrite the input. */
const SAVE_FAILED = '--save failed'

// eslint-disable-next-line no-control-regex
const ANSI_SGR = /\u001B\[[0-9;]*m/g

export interface ApplyOptions {
  /** Aborting stops puppet and its process group; the reason names the signal (SIGINT, SIGTERM, SIGHUP). */
  signal?: AbortSignal
  /** Live output, as puppet writes it. */
  onOutput?: (chunk: Buffer, stream: 'stdout' | 'stderr') => void
  /** Called once the run record exists (state: running). */
  onStart?: (record: RunRecord) => void
  /** How long puppet gets to stop after SIGTERM before SIGKILL. */
  killGraceMs?: number
  /** --splay: wait a random 0..splaySeconds before taking the lock. */
  splaySeconds?: number
  /** --if-changed: skip when the fingerprint equals the newest succeeded run's. */
  ifChanged?: boolean
  /** --max-age: with ifChanged, skip only while that run is younger than this (ms); DEFAULT_MAX_AGE_MS when absent. */
  maxAgeMs?: number
  /**
   * --save: once the run succeeded (or was skipped: the same as a run that succeeded),
   * rewrite this input's app to the run's release (see saveInputApp). Any other outcome
   * leaves the input alone, and the log says so.
   */
  save?: (release: string) => Promise<string>
  /** For tests and --replay: now. */
  now?: () => Date
  /** --keep: run directories to keep. */
  keep?: number
  /** --on-finish: a shell command run once the record is final. */
  onFinish?: string
  onFinishTimeoutMs?: number
  /** Called with puppet's pid (its process group) once it runs. */
  onPuppetStarted?: (pid: number) => Promise<void> | void
  /** For tests: the source of randomness for the splay. */
  random?: () => number
}

export interface ApplyOutcome {
  record: RunRecord
  /** What the command should exit with. */
  exitCode: number
}

/**
 * Executes a plan built with a fresh run id. Fast failures (puppet missing, Puppet
 * disabled, the lock held) throw before anything is written. Then: the run's directory
 * and record, the lock (after the splay, if any), the fingerprint and the skip decision,
 * Puppet's catalog-run lock, puppet itself with its output streamed and logged, the final
 * record, pruning of old runs, and the finish hook. Failures after the record exists are
 * recorded (state: error) and returned.
 */
export async function applyPlan(plan: RunPlan, options: ApplyOptions = {}): Promise<ApplyOutcome> {
  const puppetLocks = await preflight(plan)
  if (options.signal?.aborted) throw new InterruptedError(abortSignalName(options.signal))

  const splay = options.splaySeconds ? Math.floor((options.random ?? Math.random)() * (options.splaySeconds + 1)) : null
  let lock: RunLock | null = null
  // Without a splay the lock comes first: a run that cannot start leaves no record.
  if (splay === null) lock = await RunLock.acquire(plan.stateDir, plan.runId)
  let outcome: ApplyOutcome
  try {
    outcome = await run(plan, options, puppetLocks, splay, lock, (taken) => (lock = taken))
    if (lock) await pruneRuns(plan.stateDir, options.keep ?? DEFAULT_KEEP).catch(() => {})
  } finally {
    await (lock as RunLock | null)?.release()
  }

  if (options.onFinish) {
    await runFinishHook(options.onFinish, outcome.record, {log: plan.files.log, recordFile: plan.files.record, timeoutMs: options.onFinishTimeoutMs, signal: options.signal})
  }

  return outcome
}

/**
 * The checks that can fail fast, before anything is written: puppet is there, Puppet is
 * not disabled, and (for apply --detach, which must answer before the run) no other run
 * holds the lock. Returns where Puppet's lock files are.
 */
export async function preflight(plan: RunPlan, options: {checkLock?: boolean} = {}): Promise<PuppetLockPaths> {
  if (plan.puppet.path === null) {
    throw new PuppetUnavailableError(`puppet not found: ${plan.puppet.command}`, [
      'install it (Debian: apt-get install puppet-agent) or name it with --puppet PATH',
    ])
  }

  await mkdir(runsDir(plan.stateDir), {recursive: true, mode: 0o700})
  const puppetLocks = await puppetLockPaths(plan.puppet.path, plan.puppetArgs, plan.stateDir)
  await assertEnabled(puppetLocks)
  if (options.checkLock) {
    const holder = await RunLock.holder(plan.stateDir)
    if (holder) throw new LockHeldError(`${holder.runId ? `run ${holder.runId}` : 'a run'} (pid ${holder.pid}) holds the lock ${lockPath(plan.stateDir)} since ${holder.acquiredAt}`, holder)
  }

  return puppetLocks
}

async function run(
  plan: RunPlan,
  options: ApplyOptions,
  puppetLocks: PuppetLockPaths,
  splay: number | null,
  lock: RunLock | null,
  onLock: (lock: RunLock) => void,
): Promise<ApplyOutcome> {
  const {files} = plan
  const started = new Date()
  const record = planRecord(plan, started, {splaySeconds: splay})

  await mkdir(files.dir, {mode: 0o700})
  const finish = async (state: RunState, exitCode: number, fields: Partial<RunRecord> = {}): Promise<ApplyOutcome> => {
    if (options.save && !record.saved && state !== 'succeeded' && state !== 'skipped' && !fields.error?.startsWith(SAVE_FAILED)) {
      writeLog(`localpuppet: --save: the run ${state}: the input was left as it was\n`)
    }

    const finished = new Date()
    Object.assign(record, fields, {state, exitCode, finishedAt: finished.toISOString(), durationMs: finished.getTime() - started.getTime()})
    await writeRunRecord(plan.stateDir, record)
    return {record, exitCode}
  }

  let log: number | undefined
  // A log that cannot be written (disk full) must not crash the run while Puppet applies:
  // the first failure is kept, and reported once Puppet is done (74).
  let logFailure: unknown = null
  let unmark: (() => Promise<void>) | undefined
  const writeLog = (text: string): void => {
    if (log === undefined || logFailure !== null) return
    try {
      writeSync(log, text)
    } catch (error) {
      logFailure = error
    }
  }

  // --save, once the run succeeded: the input's app follows. When the input cannot be
  // rewritten after all (it was checked before the run), the run is an error (74): Puppet
  // applied, but the node's next run would not stay on this release.
  const save = async (fields: Partial<RunRecord>): Promise<ApplyOutcome | null> => {
    if (!options.save) return null
    try {
      record.saved = await options.save(plan.release)
    } catch (caught) {
      const error = asIoError(caught) ?? caught
      if (!(error instanceof LocalpuppetError)) throw error
      const message = `${SAVE_FAILED}: ${error.message}; puppet applied ${plan.release}, but the input still names its earlier release`
      writeLog(`localpuppet: ${message}\n`)
      return finish('error', error.exitCode, {...fields, error: message})
    }

    writeLog(`localpuppet: --save: ${record.saved} now names ${plan.release}\n`)
    return null
  }

  try {
    await writeRunRecord(plan.stateDir, record)
    log = openSync(files.log, 'a', 0o600)
    writeLog(`localpuppet: run ${plan.runId}: ${plan.release} (${plan.ref})${plan.noop ? ', noop' : ''}\n`)
    options.onStart?.(record)
    if (splay !== null) {
      writeLog(`localpuppet: splay: waiting ${splay}s before taking the lock\n`)
      await sleep(splay * 1000, undefined, {signal: options.signal}).catch(() => {})
      if (options.signal?.aborted) throw new InterruptedError(abortSignalName(options.signal))
      onLock((lock = await RunLock.acquire(plan.stateDir, plan.runId)))
      await assertEnabled(puppetLocks)
    }

    // From here on the run reads its releases: an install must not replace one meanwhile.
    unmark = await markReleasesInUse(plan.moduleDir, plan.runId, plan.releases.map((release) => release.release))
    const fingerprint = await runFingerprint(plan)
    record.fingerprint = fingerprint
    if (options.ifChanged) {
      const previous = await previousRun(plan.stateDir, plan.runId)
      const maxAgeMs = options.maxAgeMs ?? DEFAULT_MAX_AGE_MS
      const age = previous ? (options.now?.() ?? new Date()).getTime() - Date.parse(previous.finishedAt ?? previous.startedAt) : null
      if (previous?.state === 'succeeded' && previous.fingerprint === fingerprint && age !== null && age < maxAgeMs) {
        const reason = `nothing changed since run ${previous.id}, ${formatAge(age)} ago (same releases, ENC document, facts, manifest and options; --max-age ${formatAge(maxAgeMs)})`
        writeLog(`localpuppet: skipped: ${reason}\n`)
        return (await save({})) ?? (await finish('skipped', ExitCode.ok, {reason}))
      }

      if (previous?.state === 'succeeded' && previous.fingerprint === fingerprint) {
        writeLog(`localpuppet: nothing changed since run ${previous.id}, but it is ${formatAge(age ?? 0)} old (--max-age ${formatAge(maxAgeMs)}): enforcing\n`)
      }
    }

    await writeRunFiles(plan, record)
    writeLog(`localpuppet: ${plan.command.join(' ')}\n`)
    if (options.signal?.aborted) throw new InterruptedError(abortSignalName(options.signal))
    const releaseCatalogLock = await holdCatalogRunLock(puppetLocks)
    let outcome: PuppetOutcome
    try {
      // The lock names puppet's process group too: if localpuppet is killed -9, the lock
      // stays held while that orphaned puppet still runs.
      outcome = await runPuppet(plan, writeLog, {
        ...options,
        onPuppetStarted: async (pid) => {
          await lock?.update({group: pid}).catch(() => {})
          // So that status can tell an orphaned Puppet (localpuppet killed -9) is still applying.
          Object.assign(record, {puppetPid: pid, puppetStart: processStartTime(pid)})
          await writeRunRecord(plan.stateDir, record).catch(() => {})
        },
      })
    } finally {
      await releaseCatalogLock()
    }

    const summary = await readRunSummary(files.summary)
    const resources = summary?.resources ?? null
    writeLog(`localpuppet: ${describeExit(outcome.exit)}\n`)

    if (outcome.stoppedBy) {
      const error = outcome.stoppedBy === 'timeout' ? new TimeoutError(`timed out after ${plan.timeoutSeconds}s; puppet was stopped`) : new InterruptedError(outcome.stoppedBy)
      return await finish('interrupted', error.exitCode, {puppetExitCode: outcome.exit.exitCode, resources, error: error.message})
    }

    if (outcome.exit.spawnError) {
      const error = new PuppetUnavailableError(`could not start ${plan.command[0]}: ${outcome.exit.spawnError.message}`)
      return await finish('error', error.exitCode, {error: error.message})
    }

    const puppetExit = outcome.exit.exitCode
    const logIo = logFailure === null ? null : asIoError(logFailure, `log ${files.log}`)
    if (logIo) {
      return await finish('error', logIo.exitCode, {puppetExitCode: puppetExit, resources, error: `${logIo.message}; puppet exited ${puppetExit ?? outcome.exit.signal} and its output is incomplete in the log`})
    }

    if (logFailure !== null) throw logFailure
    const succeeded = puppetExit === 0 || puppetExit === 2
    const exitCode = plan.detailedExitcodes && puppetExit !== null ? honestDetailedExit(puppetExit, plan.noop, resources) : succeeded ? ExitCode.ok : ExitCode.failed
    const error = succeeded ? null : puppetExit === null ? `puppet was killed by ${outcome.exit.signal}` : describePuppetFailure(puppetExit, summary !== null)
    if (succeeded) {
      const unsaved = await save({puppetExitCode: puppetExit, resources})
      if (unsaved) return unsaved
    }

    return await finish(succeeded ? 'succeeded' : 'failed', exitCode, {puppetExitCode: puppetExit, resources, error, firstError: outcome.firstError})
  } catch (caught) {
    // A full disk in the state directory is the machine's fault (74), not a bug.
    const error = asIoError(caught) ?? caught
    const known = error instanceof LocalpuppetError
    writeLog(`localpuppet: ${(error as Error).message}\n`)
    const state: RunState =
      error instanceof InterruptedError ? 'interrupted' : error instanceof LockHeldError ? 'busy' : error instanceof PuppetDisabledError ? 'refused' : 'error'
    const outcome = await finish(state, known ? error.exitCode : ExitCode.internal, {
      error: (error as Error).message,
    }).catch(() => null)
    if (outcome && known) return outcome
    throw error
  } finally {
    if (log !== undefined) closeSync(log)
    await unmark?.()
  }
}

/** A plan's run record as it starts: state running, nothing known of the outcome yet. */
export function planRecord(plan: RunPlan, started: Date, fields: Partial<RunRecord> = {}): RunRecord {
  return newRunRecord(plan.runId, plan.files.log, started, {
    release: plan.release,
    ref: plan.ref,
    modulepath: plan.modulepath,
    input: {source: plan.input.source, document: plan.input.document},
    inputDigest: plan.input.digest,
    noop: plan.noop,
    allowMutable: plan.allowMutable,
    allowUntrusted: plan.allowUntrusted,
    untrusted: plan.untrusted,
    mutableEntries: plan.mutableEntries,
    unverified: plan.unverified,
    facts: plan.facts,
    environment: plan.environment,
    manifest: plan.manifest.path,
    command: plan.command,
    puppetArgs: plan.puppetArgs,
    replayOf: plan.replayOf ?? null,
    puppet: {implementation: plan.puppet.implementation, version: plan.puppet.version, path: plan.puppet.path},
    languageMode: plan.languageMode,
    ...(plan.fetch ? {fetch: plan.fetch} : {}),
    ...fields,
  })
}

async function writeRunFiles(plan: RunPlan, record: RunRecord): Promise<void> {
  const {files} = plan
  // The manifest as applied, kept so that --replay applies the same one even after it changed.
  if (plan.manifest.source !== 'empty') {
    const bytes = await readFile(plan.manifest.path)
    record.manifestDigest = `sha256:${createHash('sha256').update(bytes).digest('hex')}`
    const copy = manifestCopyPath(plan.stateDir, plan.runId)
    if (plan.manifest.path !== copy) await copyFile(plan.manifest.path, copy)
  }

  await writeFile(files.encYaml, plan.encYaml, {mode: 0o600})
  await writeFile(files.encScript, renderEncScript(files.encYaml, plan.runId), {mode: 0o700})
  // Puppet needs a directory for the ENC's environment (and for production, its default).
  for (const name of new Set(['production', plan.environment])) {
    await mkdir(join(files.environmentPath, name), {recursive: true, mode: 0o700})
  }

  if (plan.manifest.source === 'empty') await writeFile(files.emptyManifest, '', {mode: 0o600})
}

interface PuppetOutcome {
  exit: ChildExit
  stoppedBy: 'timeout' | NodeJS.Signals | null
  /** Puppet's own first `Error:` line, for a fleet's table: the operator sees why without fetching the log. */
  firstError: string | null
}

/** Finds the first line of Puppet's output that starts with `Error:`, across chunks, looking no further once found. */
function firstErrorFinder(): {feed(text: string): void; found(): string | null} {
  let found: string | null = null
  let partial = ''
  return {
    feed(text) {
      if (found !== null) return
      const lines = (partial + text).split('\n')
      partial = (lines.pop() ?? '').slice(-4096)
      // Facter's own complaints (a fact it could not read) are not why a catalog failed.
      found = lines.find((line) => line.startsWith('Error: ') && !line.startsWith('Error: Facter:'))?.slice(0, 1000).trimEnd() ?? null
    },
    found: () => found ?? (partial.startsWith('Error: ') && !partial.startsWith('Error: Facter:') ? partial.slice(0, 1000).trimEnd() : null),
  }
}

async function runPuppet(plan: RunPlan, writeLog: (text: string) => void, options: ApplyOptions): Promise<PuppetOutcome> {
  const errors = firstErrorFinder()
  const output = (stream: 'stdout' | 'stderr') => {
    // The log is for reading later with any pager: no terminal colour codes in it. The
    // decoder keeps a character split across two chunks whole.
    const decoder = new StringDecoder('utf8')
    return (chunk: Buffer) => {
      const text = decoder.write(chunk).replaceAll(ANSI_SGR, '')
      writeLog(text)
      errors.feed(text)
      options.onOutput?.(chunk, stream)
    }
  }

  const child = startChild(plan.command[0], plan.command.slice(1), {
    env: plan.env,
    ...(plan.cwd ? {cwd: plan.cwd} : {}),
    ownGroup: true,
    onStdout: output('stdout'),
    onStderr: output('stderr'),
  })

  const grace = options.killGraceMs ?? 10_000
  let stoppedBy: PuppetOutcome['stoppedBy'] = null
  let forceKill: NodeJS.Timeout | undefined
  const stop = (reason: 'timeout' | NodeJS.Signals) => {
    if (stoppedBy !== null) return
    stoppedBy = reason
    child.killTree('SIGTERM')
    forceKill = setTimeout(() => child.killTree('SIGKILL'), grace)
  }

  const onAbort = () => stop(abortSignalName(options.signal!))
  options.signal?.addEventListener('abort', onAbort, {once: true})
  // A signal that came while puppet was being started fires no event: act on it now.
  if (options.signal?.aborted) onAbort()
  if (child.pid !== undefined) await options.onPuppetStarted?.(child.pid)
  const timer = plan.timeoutSeconds ? setTimeout(() => stop('timeout'), timerDelay(plan.timeoutSeconds * 1000)) : undefined
  try {
    const exit = await child.exited
    // Puppet may exit on SIGTERM before the commands it started do: they go too.
    if (stoppedBy !== null) await child.reapTree(grace)
    return {exit, stoppedBy, firstError: errors.found()}
  } finally {
    clearTimeout(timer)
    clearTimeout(forceKill)
    options.signal?.removeEventListener('abort', onAbort)
  }
}

/**
 * Puppet's --noop --detailed-exitcodes exits 0 (or 4) even when resources are out of
 * sync: noop changes are not counted. The summary's out-of-sync count is the honest
 * figure, so a noop run with pending changes reports them with the changes bit (2).
 */
export function honestDetailedExit(puppetExit: number, noop: boolean, resources: ResourceCounts | null): number {
  if (noop && resources !== null && resources.outOfSync > 0 && (puppetExit === 0 || puppetExit === 4)) return puppetExit | 2
  return puppetExit
}

function abortSignalName(signal: AbortSignal): NodeJS.Signals {
  const reason = signal.reason
  return typeof reason === 'string' && reason.startsWith('SIG') ? (reason as NodeJS.Signals) : 'SIGTERM'
}

function describeExit(exit: ChildExit): string {
  if (exit.spawnError) return `puppet could not start: ${exit.spawnError.message}`
  if (exit.signal) return `puppet was killed by ${exit.signal}`
  return `puppet exited ${exit.exitCode}`
}

function describePuppetFailure(code: number, summarised: boolean): string {
  if (code === 4 || code === 6) return `puppet reported failures (exit ${code})`
  if (code === 1 && !summarised) return 'puppet run failed (exit 1): the catalog did not compile or puppet could not start the run; see the log'
  return `puppet run failed (exit ${code})`
}
