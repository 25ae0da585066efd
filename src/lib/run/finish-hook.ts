import {appendFile} from 'node:fs/promises'

import type {RunRecord} from '../state/run-record.js'
import {startChild} from './child.js'

/** How long a finish hook may take before it is stopped. */
export const FINISH_HOOK_TIMEOUT_MS = 60_000

/**
 * Runs `--on-finish CMD` with /bin/sh once the run record is final: the record as JSON
 * on stdin, LOCALPUPPET_RUN_ID and LOCALPUPPET_RUN_STATE in the environment. It is given
 * a minute; its output and failure go to the run's log and never change the run's result.
 */
export async function runFinishHook(command: string, record: RunRecord, logPath: string, timeoutMs = FINISH_HOOK_TIMEOUT_MS): Promise<void> {
  const lines: string[] = []
  const capture = (chunk: Buffer) => lines.push(chunk.toString('utf8'))
  const child = startChild('/bin/sh', ['-c', command], {
    env: {LOCALPUPPET_RUN_ID: record.id, LOCALPUPPET_RUN_STATE: record.state},
    input: JSON.stringify(record) + '\n',
    ownGroup: true,
    onStdout: capture,
    onStderr: capture,
  })
  let timedOut = false
  const timer = setTimeout(() => {
    timedOut = true
    child.killTree('SIGKILL')
  }, timeoutMs)
  const exit = await child.exited
  clearTimeout(timer)
  const output = lines.join('').trimEnd()
  const outcome = timedOut ? `stopped after ${timeoutMs / 1000}s` : exit.spawnError ? `could not start: ${exit.spawnError.message}` : exit.exitCode === 0 ? 'ok' : `failed (exit ${exit.exitCode ?? exit.signal})`
  const text = `localpuppet: on-finish hook ${outcome}: ${command}\n${output === '' ? '' : output.replace(/^/gm, 'on-finish: ') + '\n'}`
  await appendFile(logPath, text, {mode: 0o600}).catch(() => {})
}
