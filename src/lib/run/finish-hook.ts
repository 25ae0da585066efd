import {randomBytes} from 'node:crypto'
import {closeSync, openSync} from 'node:fs'
import {appendFile} from 'node:fs/promises'
import {setTimeout as sleep} from 'node:timers/promises'

import type {RunRecord} from '../state/run-record.js'
import {processesWithEnv, survivors} from '../util/process-tree.js'
import {startChild} from '../util/child.js'
import {timerDelay} from '../util/timer-delay.js'

/** How long a finish hook, and everything it started, may take before it is stopped. */
export const FINISH_HOOK_TIMEOUT_MS = 60_000
/** How much of the hook's output goes to the run's log; the rest is counted and dropped. */
export const FINISH_HOOK_OUTPUT_BYTES = 64 * 1024
/**
 * How much address space (RLIMIT_AS) the hook and each process it starts may use. 1 GiB
 * leaves room for sh, curl, jq, ruby, python and node, and stops a runaway long before
 * it can push the node into the OOM killer (whose first choice could be Puppet's run).
 */
export const FINISH_HOOK_MEMORY_BYTES = 1024 * 1024 * 1024
/** After the hook's shell exits (or is stopped), how long what it left behind gets to go after SIGTERM. */
const LEFTOVER_GRACE_MS = 1000

export interface FinishHookOptions {
  /** The run's log: the hook's outcome and (capped) output are appended to it. */
  log: string
  /** run.json, already final: the hook's standard input is this file, so `/dev/stdin` works. */
  recordFile: string
  timeoutMs?: number
  outputBytes?: number
  /** The address space limit of the hook and of each process it starts (FINISH_HOOK_MEMORY_BYTES). */
  memoryBytes?: number
  /** Aborting (SIGTERM to apply) stops the hook and all it started at once. */
  signal?: AbortSignal
}

/**
 * Runs `--on-finish CMD` with /bin/sh once the run record is final: the record (run.json,
 * a real file) on stdin, LOCALPUPPET_RUN_ID and LOCALPUPPET_RUN_STATE in the environment.
 * Bounded: when the shell exits, whatever it left running (its process group, its
 * descendants, and processes that left both with setsid: they carry a token in their
 * environment) is stopped; the whole lot gets `timeoutMs`; only the first `outputBytes`
 * of output are kept; each of its processes may use `memoryBytes` of address space
 * (`ulimit -v`, soft and hard, so the hook cannot raise it). Its outcome goes to the run's log and never changes the run's result.
 */
export async function runFinishHook(command: string, record: RunRecord, options: FinishHookOptions): Promise<void> {
  const timeoutMs = options.timeoutMs ?? FINISH_HOOK_TIMEOUT_MS
  const limit = options.outputBytes ?? FINISH_HOOK_OUTPUT_BYTES
  const token = `LOCALPUPPET_HOOK_TOKEN=${randomBytes(8).toString('hex')}`
  const kept: Buffer[] = []
  let keptBytes = 0
  let dropped = 0
  const capture = (chunk: Buffer) => {
    const room = limit - keptBytes
    if (room > 0) {
      kept.push(chunk.subarray(0, room))
      keptBytes += Math.min(room, chunk.length)
    }

    dropped += Math.max(0, chunk.length - Math.max(0, room))
  }

  let stdin: number | undefined
  try {
    stdin = openSync(options.recordFile, 'r')
  } catch {
    // No record to hand over: the hook gets no stdin, and still runs.
  }

  const [name, value] = token.split('=')
  const memoryKiB = Math.floor((options.memoryBytes ?? FINISH_HOOK_MEMORY_BYTES) / 1024)
  // The limit is set by a shell that then becomes the hook's: `ulimit` is the shell's own
  // (no prlimit needed), and a lower limit already in force stays (raising it fails).
  const child = startChild('/bin/sh', ['-c', 'ulimit -v "$1" 2>/dev/null; exec /bin/sh -c "$2"', '/bin/sh', String(memoryKiB), command], {
    env: {LOCALPUPPET_RUN_ID: record.id, LOCALPUPPET_RUN_STATE: record.state, [name]: value},
    ...(stdin === undefined ? {input: JSON.stringify(record) + '\n'} : {stdinFd: stdin}),
    ownGroup: true,
    onStdout: capture,
    onStderr: capture,
  })
  if (stdin !== undefined) closeSync(stdin)

  let stopped: string | null = null
  const stopAll = async (signal: NodeJS.Signals) => {
    child.killTree(signal, processesWithEnv(token))
  }

  const timer = setTimeout(() => {
    stopped ??= `stopped after ${timeoutMs / 1000}s`
    void stopAll('SIGKILL')
  }, timerDelay(timeoutMs))
  const onAbort = () => {
    stopped ??= `stopped by ${String(options.signal?.reason ?? 'a signal')}`
    void stopAll('SIGKILL')
  }

  options.signal?.addEventListener('abort', onAbort, {once: true})
  if (options.signal?.aborted) onAbort()
  try {
    const ended = await child.processEnded
    // The shell is gone; what it left behind goes too: first politely, then not.
    const leftovers = processesWithEnv(token)
    if (leftovers.length > 0 || stopped !== null) {
      child.killTree('SIGTERM', leftovers)
      const until = Date.now() + LEFTOVER_GRACE_MS
      while (survivors(processesWithEnv(token)).length > 0 && Date.now() < until) await sleep(50)
      child.killTree('SIGKILL', processesWithEnv(token))
    }

    // A process that escaped even that (it cleared its environment) may still hold the
    // output open: stop reading rather than wait for it.
    const exit = await Promise.race([child.exited, sleep(LEFTOVER_GRACE_MS).then(() => null)])
    if (exit === null) child.closeOutput()
    const outcome =
      stopped ??
      (ended === null
        ? `could not start: ${exit?.spawnError?.message ?? '/bin/sh'}`
        : ended.exitCode === 0
          ? 'ok'
          : `failed (exit ${ended.exitCode ?? ended.signal})`)
    const output = Buffer.concat(kept).toString('utf8').trimEnd()
    const more = dropped > 0 ? `on-finish: (${dropped} more bytes of output dropped)\n` : ''
    const text = `localpuppet: on-finish hook ${outcome}: ${command}\n${output === '' ? '' : output.replace(/^/gm, 'on-finish: ') + '\n'}${more}`
    await appendFile(options.log, text, {mode: 0o600}).catch(() => {})
  } finally {
    clearTimeout(timer)
    options.signal?.removeEventListener('abort', onAbort)
  }
}
