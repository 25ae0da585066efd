import {closeSync, openSync, writeSync} from 'node:fs'
import {mkdir} from 'node:fs/promises'
import {setTimeout as sleep} from 'node:timers/promises'

import {RunLock} from './lock.js'
import {pruneRuns} from './retention.js'
import {type RunRecord, type RunState, newRunRecord, writeRunRecord} from './run-record.js'
import type {RunFiles} from './state-dir.js'
import {throwIfStopped} from '../util/on-stop.js'
import {processStartTime} from '../util/process.js'

/** Where a run's journal writes: its state dir, id and files. */
export interface JournalRun {
  stateDir: string
  runId: string
  files: Pick<RunFiles, 'dir' | 'log'>
}

/** How a run record's error begins when the run succeeded but --save could not rewrite the input. */
export const SAVE_FAILED = '--save failed'

/**
 * One run's life on disk: its directory, its record (written running, when Puppet starts,
 * and final), its log, the run lock (taken before the record, or after the splay) and,
 * once the run is over, the retention of old runs. apply-run decides; the journal writes.
 */
export class RunJournal {
  private log: number | undefined
  private logFailure: unknown = null

  private constructor(
    private readonly run: JournalRun,
    readonly record: RunRecord,
    private readonly started: Date,
    readonly splay: number | null,
    private lock: RunLock | null,
    private readonly saving: boolean,
  ) {}

  /**
   * Without a splay the lock comes first: a run that cannot start leaves no record. Then the
   * record (with `fields`, started now) and the run's directory.
   */
  static async open(run: JournalRun, fields: Partial<RunRecord>, options: {splay: number | null; saving: boolean}): Promise<RunJournal> {
    const lock = options.splay === null ? await RunLock.acquire(run.stateDir, run.runId) : null
    try {
      const started = new Date()
      const journal = new RunJournal(run, newRunRecord(run.runId, run.files.log, started, fields), started, options.splay, lock, options.saving)
      await mkdir(run.files.dir, {mode: 0o700})
      return journal
    } catch (error) {
      await lock?.release()
      throw error
    }
  }

  /** The running record and the log's first line; with a splay, the wait and then the lock. */
  async begin(onStart: ((record: RunRecord) => void) | undefined, signal: AbortSignal | undefined): Promise<void> {
    const {run} = this
    await writeRunRecord(run.stateDir, this.record)
    this.log = openSync(run.files.log, 'a', 0o600)
    this.write(`localpuppet: run ${run.runId}: ${this.record.release} (${this.record.ref})${this.record.noop ? ', noop' : ''}\n`)
    onStart?.(this.record)
    if (this.splay === null) return
    this.write(`localpuppet: splay: waiting ${this.splay}s before taking the lock\n`)
    // Cut short by the signal: the check below says so.
    await sleep(this.splay * 1000, undefined, {signal}).catch(() => {})
    throwIfStopped(signal)
    this.lock = await RunLock.acquire(run.stateDir, run.runId)
  }

  /**
   * A line in the log. A log that cannot be written (disk full) must not crash the run
   * while Puppet applies: the first failure is kept (failure()), and reported once Puppet is done (74).
   */
  readonly write = (text: string): void => {
    if (this.log === undefined || this.logFailure !== null) return
    try {
      writeSync(this.log, text)
    } catch (error) {
      this.logFailure = error
    }
  }

  failure(): unknown {
    return this.logFailure
  }

  /** Puppet runs as `pid`: the lock names its group, the record its pid, so that an orphaned Puppet is seen still applying. */
  readonly puppetStarted = async (pid: number): Promise<void> => {
    // Best effort: the run goes on without them, as it did before they existed.
    await this.lock?.update({group: pid}).catch(() => {})
    Object.assign(this.record, {puppetPid: pid, puppetStart: processStartTime(pid)})
    await writeRunRecord(this.run.stateDir, this.record).catch(() => {})
  }

  /** The final record; with --save, a run that did not succeed says in the log that the input was left alone. */
  async finish(state: RunState, exitCode: number, fields: Partial<RunRecord> = {}): Promise<{record: RunRecord; exitCode: number}> {
    if (this.saving && !this.record.saved && state !== 'succeeded' && state !== 'skipped' && !fields.error?.startsWith(SAVE_FAILED)) {
      this.write(`localpuppet: --save: the run ${state}: the input was left as it was\n`)
    }

    const finished = new Date()
    Object.assign(this.record, fields, {state, exitCode, finishedAt: finished.toISOString(), durationMs: finished.getTime() - this.started.getTime()})
    await writeRunRecord(this.run.stateDir, this.record)
    return {record: this.record, exitCode}
  }

  closeLog(): void {
    if (this.log !== undefined) closeSync(this.log)
    this.log = undefined
  }

  /** Old runs pruned down to `keep`, only while this run holds the lock. */
  async prune(keep: number): Promise<void> {
    // Retention is housekeeping: a run's outcome never depends on it.
    if (this.lock) await pruneRuns(this.run.stateDir, keep).catch(() => {})
  }

  /** The run lock released, if it was taken. */
  async release(): Promise<void> {
    await this.lock?.release()
  }
}
