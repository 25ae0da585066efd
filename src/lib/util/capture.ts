import {startChild} from './child.js'
import {timerDelay} from './timer-delay.js'

export interface Captured {
  /** null when killed by a signal or when it could not start (see spawnError). */
  exitCode: number | null
  stdout: string
  stderr: string
  spawnError: {code: string | undefined; message: string} | null
}

export interface CaptureOptions {
  env?: Record<string, string | undefined>
  cwd?: string
  /** Stop it (and everything it started) after this long: `timedOut` says so. */
  timeoutMs?: number
  /** Stop it when this aborts. */
  signal?: AbortSignal
  /** Keep at most this many bytes of each stream (the rest is dropped and `truncated` set). */
  maxBytes?: number
}

/** Runs a tool to completion through the one child-process wrapper, keeping its output. */
export async function capture(file: string, args: string[], options: CaptureOptions = {}): Promise<Captured & {timedOut: boolean; truncated: boolean}> {
  const out: Buffer[] = []
  const err: Buffer[] = []
  const max = options.maxBytes ?? Number.POSITIVE_INFINITY
  let sizes = [0, 0]
  let truncated = false
  const keep = (into: Buffer[], which: 0 | 1) => (chunk: Buffer) => {
    if (sizes[which] + chunk.length > max) {
      truncated = true
      chunk = chunk.subarray(0, Math.max(0, max - sizes[which]))
    }

    sizes = which === 0 ? [sizes[0] + chunk.length, sizes[1]] : [sizes[0], sizes[1] + chunk.length]
    if (chunk.length > 0) into.push(chunk)
  }

  const stoppable = options.timeoutMs !== undefined || options.signal !== undefined
  const child = startChild(file, args, {env: options.env, cwd: options.cwd, ownGroup: stoppable, onStdout: keep(out, 0), onStderr: keep(err, 1)})
  let timedOut = false
  const stop = () => {
    child.killTree('SIGTERM')
    setTimeout(() => child.killTree('SIGKILL'), 2000).unref()
  }

  const timer = options.timeoutMs === undefined ? undefined : setTimeout(() => ((timedOut = true), stop()), timerDelay(options.timeoutMs))
  options.signal?.addEventListener('abort', stop, {once: true})
  if (options.signal?.aborted) stop()
  try {
    const exit = await child.exited
    return {exitCode: exit.exitCode, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8'), spawnError: exit.spawnError, timedOut, truncated}
  } finally {
    clearTimeout(timer)
    options.signal?.removeEventListener('abort', stop)
  }
}
