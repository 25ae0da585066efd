import {readFile} from 'node:fs/promises'
import {join} from 'node:path'
import {fileURLToPath} from 'node:url'

import type {ExecutionContext} from 'ava'
import {execa, type ResultPromise} from 'execa'

import {tempDir} from './temp.js'

export const REPO = fileURLToPath(new URL('../..', import.meta.url))
export const BIN = join(REPO, 'bin', 'run.js')
export const FIXTURES = join(REPO, 'fixtures')
export const FAKE_PUPPET = join(FIXTURES, 'fake-puppet', 'puppet')

export interface CliResult {
  exitCode: number
  stdout: string
  stderr: string
}

export interface CliOptions {
  env?: Record<string, string | undefined>
  input?: string | Uint8Array
  cwd?: string
  /** Options for node itself, before the CLI (`--import` a probe). */
  nodeArgs?: string[]
}

/** Runs the built CLI (`bin/run.js`) as a user would, never throwing on a non-zero exit. */
export async function cli(args: string[], options: CliOptions = {}): Promise<CliResult> {
  const result = await startCli(args, options)
  return {exitCode: result.exitCode ?? -1, stdout: String(result.stdout), stderr: String(result.stderr)}
}

export function startCli(args: string[], options: CliOptions = {}): ResultPromise<{reject: false}> {
  return execa('node', [...(options.nodeArgs ?? []), BIN, ...args], {
    reject: false,
    cwd: options.cwd ?? REPO,
    env: {FORCE_COLOR: '0', LOCALPUPPET_MODULE_DIR: undefined, LOCALPUPPET_STATE_DIR: undefined, LOCALPUPPET_PUPPET: undefined, ...options.env},
    extendEnv: true,
    ...(options.input === undefined ? {stdin: 'ignore' as const} : {input: options.input}),
  }) as unknown as ResultPromise<{reject: false}>
}

/**
 * Arguments after `--` that keep a real puppet run's own state (vardir, confdir, ...)
 * inside the test's temp dir instead of /etc and /var.
 */
export function isolatePuppet(dir: string): string[] {
  const p = (name: string) => join(dir, 'puppet', name)
  return ['--confdir', p('etc'), '--codedir', p('code'), '--vardir', p('var'), '--logdir', p('log'), '--rundir', p('run'), '--publicdir', p('public')]
}

/** `status --json` of the newest run (or the given one): its exit code and the run record. */
export async function statusJson(state: string, runId?: string): Promise<{exitCode: number; record: any}> {
  const result = await cli(['status', ...(runId ? [runId] : []), '--state-dir', state, '--json'])
  return {exitCode: result.exitCode, record: JSON.parse(result.stdout)}
}

/** A bound on a command that must end by itself: killed, and the test failed, past this. */
export const WATCHDOG_MS = 60_000

const MAX_RSS_PROBE = fileURLToPath(new URL('max-rss-probe.mjs', import.meta.url))

/** The CLI, killed (and the test failed) past the watchdog; with its peak resident memory in MiB (max-rss-probe.mjs). */
export async function runBounded(t: ExecutionContext, args: string[], env: Record<string, string> = {}, watchdogMs = WATCHDOG_MS): Promise<CliResult & {maxRssMb: number}> {
  const rss = join(await tempDir(t), 'max-rss')
  const child = startCli(args, {env: {...env, LOCALPUPPET_TEST_MAXRSS_FILE: rss}, nodeArgs: ['--import', MAX_RSS_PROBE]})
  const watchdog = setTimeout(() => child.kill('SIGKILL'), watchdogMs)
  const result = await child
  clearTimeout(watchdog)
  t.falsy(result.signal, `ended by itself within ${watchdogMs / 1000} s`)
  const maxRssMb = Number(await readFile(rss, 'utf8')) / 1024
  return {exitCode: result.exitCode ?? -1, stderr: String(result.stderr), stdout: String(result.stdout), maxRssMb}
}
