import {InterruptedError, PuppetUnavailableError, TimeoutError} from '../errors.js'
import {ExitCode} from '../exit-codes.js'
import type {ResourceCounts} from './resource-counts.js'
import {readRunSummary} from './run-summary.js'
import type {ChildExit} from '../util/child.js'
import {asIoError} from '../util/io-error.js'
import type {PuppetOutcome} from './puppet-process.js'

/** What reading Puppet's exit needs of the run. */
export interface PuppetRun {
  command: string[]
  noop: boolean
  detailedExitcodes: boolean
  timeoutSeconds: number | null
  files: {summary: string; log: string}
}

/** How a run ended, read from Puppet's exit and summary: the record's final state and fields, and the command's exit code. */
export interface PuppetVerdict {
  state: 'interrupted' | 'error' | 'succeeded' | 'failed'
  exitCode: number
  fields: {puppetExitCode?: number | null; resources?: ResourceCounts | null; error?: string | null; firstError?: string | null}
}

/**
 * Reads Puppet's exit: stopped (timeout or signal), not started, a log that could not be
 * written (74), or Puppet's own exit code, made honest for --noop --detailed-exitcodes.
 */
export async function puppetVerdict(plan: PuppetRun, outcome: PuppetOutcome, logFailure: unknown, log: (text: string) => void): Promise<PuppetVerdict> {
  const summary = await readRunSummary(plan.files.summary)
  const resources = summary?.resources ?? null
  log(`localpuppet: ${describeExit(outcome.exit)}\n`)
  if (outcome.stoppedBy) {
    const error = outcome.stoppedBy === 'timeout' ? new TimeoutError(`timed out after ${plan.timeoutSeconds}s; puppet was stopped`) : new InterruptedError(outcome.stoppedBy)
    return {state: 'interrupted', exitCode: error.exitCode, fields: {puppetExitCode: outcome.exit.exitCode, resources, error: error.message}}
  }

  if (outcome.exit.spawnError) {
    const error = new PuppetUnavailableError(`could not start ${plan.command[0]}: ${outcome.exit.spawnError.message}`)
    return {state: 'error', exitCode: error.exitCode, fields: {error: error.message}}
  }

  const puppetExit = outcome.exit.exitCode
  const logIo = logFailure === null ? null : asIoError(logFailure, `log ${plan.files.log}`)
  if (logIo) return {state: 'error', exitCode: logIo.exitCode, fields: {puppetExitCode: puppetExit, resources, error: `${logIo.message}; puppet exited ${puppetExit ?? outcome.exit.signal} and its output is incomplete in the log`}}
  if (logFailure !== null) throw logFailure
  const succeeded = puppetExit === 0 || puppetExit === 2
  const exitCode = plan.detailedExitcodes && puppetExit !== null ? honestDetailedExit(puppetExit, plan.noop, resources) : succeeded ? ExitCode.ok : ExitCode.failed
  const error = succeeded ? null : puppetExit === null ? `puppet was killed by ${outcome.exit.signal}` : describePuppetFailure(puppetExit, summary !== null)
  return {state: succeeded ? 'succeeded' : 'failed', exitCode, fields: {puppetExitCode: puppetExit, resources, error, firstError: outcome.firstError}}
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
