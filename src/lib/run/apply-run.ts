import {planDocument} from './plan-document.js'
import {createHash} from 'node:crypto'
import {copyFile, mkdir, readFile, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import {renderEncScript} from '../enc/exec-enc.js'
import {InterruptedError, LocalpuppetError, LockHeldError, PuppetDisabledError, PuppetUnavailableError} from '../errors.js'
import {ExitCode} from '../exit-codes.js'
import {assertEnabled, holdCatalogRunLock} from '../puppet/puppet-locks.js'
import {type PuppetLockPaths, puppetLockPaths} from '../puppet/puppet-paths.js'
import {markReleasesInUse} from '../install/in-use.js'
import {RunLock, lockPath} from '../state/lock.js'
import {asIoError} from '../util/io-error.js'
import {throwIfStopped} from '../util/on-stop.js'
import {type RunRecord, type RunState, newRunRecord, readRunRecords} from '../state/run-record.js'
import {correctiveChanges} from '../drift/corrective.js'
import {RunJournal, SAVE_FAILED} from '../state/run-journal.js'
import {DEFAULT_KEEP} from './defaults.js'
import {manifestCopyPath, runsDir} from '../state/state-dir.js'
import {runFingerprint} from './fingerprint.js'
import {runFinishHook} from './finish-hook.js'
import {unchangedReason} from './if-changed.js'
import {runPuppet} from '../puppet/puppet-process.js'
import {puppetVerdict} from '../puppet/puppet-exit.js'
import type {RunPlan} from './run-plan.js'

export {honestDetailedExit} from '../puppet/puppet-exit.js'

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
  /** The CLI (`bin/run.js`) Puppet's Hiera backend runs to open a run's secrets (`node-key --hiera`); default: the one running. */
  cliEntry?: string
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
  throwIfStopped(options.signal)
  const splay = options.splaySeconds ? Math.floor((options.random ?? Math.random)() * (options.splaySeconds + 1)) : null
  const journal = await RunJournal.open(plan, {...planFields(plan), splaySeconds: splay}, {splay, saving: Boolean(options.save)})
  let outcome: ApplyOutcome
  try {
    outcome = await run(plan, options, puppetLocks, journal)
    await journal.prune(options.keep ?? DEFAULT_KEEP)
  } finally {
    await journal.release()
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

async function run(plan: RunPlan, options: ApplyOptions, puppetLocks: PuppetLockPaths, journal: RunJournal): Promise<ApplyOutcome> {
  const {record, write: log} = journal
  let unmark: (() => Promise<void>) | undefined
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
      log(`localpuppet: ${message}\n`)
      return journal.finish('error', error.exitCode, {...fields, error: message})
    }

    log(`localpuppet: --save: ${record.saved} now names ${plan.release}\n`)
    return null
  }

  try {
    await journal.begin(options.onStart, options.signal)
    if (journal.splay !== null) await assertEnabled(puppetLocks)
    // From here on the run reads its releases: an install must not replace one meanwhile.
    unmark = await markReleasesInUse(plan.moduleDir, plan.runId, plan.releases.map((release) => release.release))
    record.fingerprint = await runFingerprint(plan)
    const reason = options.ifChanged ? await unchangedReason(plan, record.fingerprint, options, log) : null
    if (reason !== null) return (await save({})) ?? (await journal.finish('skipped', ExitCode.ok, {reason}))
    await writeRunFiles(plan, record, options.cliEntry ?? process.argv[1])
    log(`localpuppet: ${plan.command.join(' ')}\n`)
    throwIfStopped(options.signal)
    const releaseCatalogLock = await holdCatalogRunLock(puppetLocks)
    let outcome
    try {
      outcome = await runPuppet(plan, {...options, log, onPuppetStarted: journal.puppetStarted})
    } finally {
      await releaseCatalogLock()
    }

    const verdict = await puppetVerdict(plan, outcome, journal.failure(), log)
    await countDrift(plan, record.fingerprint, verdict.fields, log)
    // A --save that fails after a successful run records Puppet's exit and resources, as the run's own fields.
    const unsaved = verdict.state === 'succeeded' ? await save({puppetExitCode: verdict.fields.puppetExitCode, resources: verdict.fields.resources}) : null
    return unsaved ?? (await journal.finish(verdict.state, verdict.exitCode, verdict.fields))
  } catch (caught) {
    // A full disk in the state directory is the machine's fault (74), not a bug.
    const error = asIoError(caught) ?? caught
    const known = error instanceof LocalpuppetError
    log(`localpuppet: ${(error as Error).message}\n`)
    const state: RunState =
      error instanceof InterruptedError ? 'interrupted' : error instanceof LockHeldError ? 'busy' : error instanceof PuppetDisabledError ? 'refused' : 'error'
    // The record may be what failed (a full disk): the error itself is the answer then.
    const outcome = await journal.finish(state, known ? error.exitCode : ExitCode.internal, {error: (error as Error).message}).catch(() => null)
    if (outcome && known) return outcome
    throw error
  } finally {
    journal.closeLog()
    await unmark?.()
  }
}

/**
 * The run's drift (see drift/), into its resources and record: what it corrected, said in
 * the log. Drift is what a run reports, never its outcome: a report that cannot be read
 * leaves the count unknown.
 */
async function countDrift(plan: RunPlan, fingerprint: string | null, fields: Partial<RunRecord>, log: (text: string) => void): Promise<void> {
  // A noop run's drift is its out-of-sync count; a run that changed nothing corrected nothing (no records to read).
  if (!fields.resources || plan.noop) return
  const records = fields.resources.changed === 0 ? [] : await readRunRecords(plan.stateDir).catch(() => [])
  const {count, corrected} = await correctiveChanges({id: plan.runId, noop: false, fingerprint, resources: fields.resources, report: plan.files.report}, records)
  fields.resources = {...fields.resources, correctiveChange: count}
  fields.corrected = corrected
  if (corrected) log(`localpuppet: drift: corrected ${count} resource(s) changed since run ${corrected.since} (same fingerprint): ${corrected.resources.join(', ')}${(count ?? 0) > corrected.resources.length ? ', ...' : ''}\n`)
}

async function writeRunFiles(plan: RunPlan, record: RunRecord, cliEntry: string): Promise<void> {
  const {files} = plan
  // The manifest as applied, kept so that --replay applies the same one even after it changed.
  if (plan.manifest.source !== 'empty') {
    const bytes = await readFile(plan.manifest.path)
    record.manifestDigest = `sha256:${createHash('sha256').update(bytes).digest('hex')}`
    const copy = manifestCopyPath(plan.stateDir, plan.runId)
    if (plan.manifest.path !== copy) await copyFile(plan.manifest.path, copy)
  }

  await writeFile(files.encYaml, plan.encYaml, {mode: 0o600})
  // Kept encrypted to the node's own key; Puppet's Hiera backend asks this localpuppet to open them.
  if (plan.secrets) await (await import('../secrets/hiera-secrets.js')).writeSecretFiles(files.dir, plan.stateDir, plan.secrets, [process.execPath, cliEntry])
  await writeFile(files.encScript, renderEncScript(files.encYaml, plan.runId), {mode: 0o700})
  // Puppet needs a directory for the ENC's environment (and for production, its default).
  for (const name of new Set(['production', plan.environment])) {
    await mkdir(join(files.environmentPath, name), {recursive: true, mode: 0o700})
  }

  if (plan.manifest.source === 'empty') await writeFile(files.emptyManifest, '', {mode: 0o600})
  const routes = plan.command.indexOf('--route_file')
  if (routes !== -1 && plan.command[routes + 1] === join(files.dir, 'routes.yaml')) {
    const {ROUTES_YAML} = await import('../puppetdb/after-run.js')
    await writeFile(plan.command[routes + 1], ROUTES_YAML, {mode: 0o600})
  }
}

/** A plan's run record as it starts: state running, nothing known of the outcome yet. */
export function planRecord(plan: RunPlan, started: Date, fields: Partial<RunRecord> = {}): RunRecord {
  return newRunRecord(plan.runId, plan.files.log, started, {...planFields(plan), ...fields})
}

/** What a plan puts in its run record. */
function planFields(plan: RunPlan): Partial<RunRecord> {
  return {
    release: plan.release,
    ref: plan.ref,
    modulepath: plan.modulepath,
    input: {source: plan.input.source, document: plan.input.document},
    inputDigest: plan.input.digest,
    ...(plan.layers ? {layers: {layers: plan.layers.layers, document: planDocument(plan).document}} : {}),
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
  }
}
