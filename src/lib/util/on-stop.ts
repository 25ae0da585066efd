import {InterruptedError} from '../errors.js'

/** The signals that stop localpuppet from outside: ^C, `kill`, systemd, a CI timeout, a closed terminal. */
const STOP_SIGNALS: NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP']

const cleanups = new Set<(signal: NodeJS.Signals | null) => void>()

function runCleanups(signal: NodeJS.Signals | null): void {
  for (const cleanup of cleanups) {
    try {
      cleanup(signal)
    } catch {
      // One cleanup failing must not keep the others from running on the way out.
    }
  }
}

function onSignal(signal: NodeJS.Signals): void {
  runCleanups(signal)
  // A command that handles the signal itself (apply stops its run) goes on doing so;
  // otherwise the process dies of the signal, as it would have (128 + n for shells).
  if (process.listenerCount(signal) === 1) {
    uninstall()
    process.kill(process.pid, signal)
  }
}

function onExit(): void {
  runCleanups(null)
}

function install(): void {
  for (const signal of STOP_SIGNALS) process.on(signal, onSignal)
  process.on('exit', onExit)
}

function uninstall(): void {
  for (const signal of STOP_SIGNALS) process.off(signal, onSignal)
  process.off('exit', onExit)
}

/**
 * Runs `cleanup` (synchronously: it must not wait) if localpuppet is stopped by SIGINT,
 * SIGTERM or SIGHUP, or exits, while it is registered: children to stop, a temporary
 * file to remove. Node runs no 'exit' handler for a signal nobody handles, so exit
 * alone is not enough. Returns the function that unregisters it; one set of handlers
 * serves every registration.
 */
export function onStop(cleanup: (signal: NodeJS.Signals | null) => void): () => void {
  if (cleanups.size === 0) install()
  cleanups.add(cleanup)
  return () => {
    cleanups.delete(cleanup)
    if (cleanups.size === 0) uninstall()
  }
}

/**
 * Runs `fn` with a signal that SIGINT, SIGTERM or SIGHUP abort (its reason names the
 * signal) instead of stopping the process: what is running (puppet, a hook) is stopped
 * and recorded as interrupted, and the process then ends as the caller decides.
 */
export async function withStopSignals<T>(fn: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const controller = new AbortController()
  const onSignal = (signal: NodeJS.Signals) => controller.abort(signal)
  for (const signal of STOP_SIGNALS) process.on(signal, onSignal)
  try {
    return await fn(controller.signal)
  } finally {
    for (const signal of STOP_SIGNALS) process.off(signal, onSignal)
  }
}

/** The signal an abort names (SIGINT, SIGTERM, SIGHUP); SIGTERM when it names none. */
export function abortSignalName(signal: AbortSignal): NodeJS.Signals {
  const reason = signal.reason
  return typeof reason === 'string' && reason.startsWith('SIG') ? (reason as NodeJS.Signals) : 'SIGTERM'
}

/** Throws InterruptedError (naming the signal) once the signal has aborted. */
export function throwIfStopped(signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw new InterruptedError(abortSignalName(signal))
}
