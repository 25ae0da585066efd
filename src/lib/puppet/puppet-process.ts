import {StringDecoder} from 'node:string_decoder'

import {type ChildExit, startChild} from '../util/child.js'
import {abortSignalName} from '../util/on-stop.js'
import {timerDelay} from '../util/timer-delay.js'

/** Puppet as a run starts it: the argv, its environment and directory, and its time limit. */
export interface PuppetCommand {
  command: string[]
  env: Record<string, string>
  cwd: string | null
  timeoutSeconds: number | null
}

// eslint-disable-next-line no-control-regex
const ANSI_SGR = /\u001B\[[0-9;]*m/g

/** What Puppet's process needs besides the plan: where its output goes, and how it is stopped. */
export interface PuppetProcessOptions {
  signal?: AbortSignal
  onOutput?: (chunk: Buffer, stream: 'stdout' | 'stderr') => void
  killGraceMs?: number
  onPuppetStarted?: (pid: number) => Promise<void> | void
  /** The run's log (the journal's). */
  log: (text: string) => void
}

export interface PuppetOutcome {
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

export async function runPuppet(plan: PuppetCommand, options: PuppetProcessOptions): Promise<PuppetOutcome> {
  const errors = firstErrorFinder()
  const output = (stream: 'stdout' | 'stderr') => {
    // The log is for reading later with any pager: no terminal colour codes in it. The
    // decoder keeps a character split across two chunks whole.
    const decoder = new StringDecoder('utf8')
    return (chunk: Buffer) => {
      const text = decoder.write(chunk).replaceAll(ANSI_SGR, '')
      options.log(text)
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
