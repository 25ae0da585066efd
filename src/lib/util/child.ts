import {spawn} from 'node:child_process'
import {setTimeout as sleep} from 'node:timers/promises'


import {findExecutable, securePath} from './find-executable.js'
import {onStop} from './on-stop.js'
import {type ProcessId, descendants, signalIfSame, survivors} from './process-tree.js'

export interface ChildOptions {
  /** Added to the inherited environment; an undefined value removes a variable. */
  env?: Record<string, string | undefined>
  cwd?: string
  /** Its own process group, so it can be stopped as a whole and a terminal's ^C reaches only us. */
  ownGroup?: boolean
  onStdout?: (chunk: Buffer) => void
  onStderr?: (chunk: Buffer) => void
  /** Data written to the child's stdin, then closed; otherwise stdin is /dev/null. */
  input?: string
  /** An open file descriptor to give the child as its stdin (a real file: /dev/stdin works, unlike a socket). */
  stdinFd?: number
}

export interface ChildExit {
  /** null when the child was killed by a signal or could not start. */
  exitCode: number | null
  signal: NodeJS.Signals | null
  /** Set when the child could not be started at all (ENOENT, EACCES). */
  spawnError: {code: string | undefined; message: string} | null
}

export interface Child {
  pid: number | undefined
  exited: Promise<ChildExit>
  /** The child process itself ended, whether or not processes it left behind still hold its output open. */
  processEnded: Promise<{exitCode: number | null; signal: NodeJS.Signals | null} | null>
  /** Stops reading the child's output (after processEnded, when leftovers may keep it open). */
  closeOutput(): void
  /**
   * Signals the child and every process it started, its process group and the children
   * that left it (setsid) alike. The first call remembers them, so that a later SIGKILL
   * still reaches children orphaned when the child itself exited.
   */
  killTree(signal: NodeJS.Signals, also?: ProcessId[]): void
  /** After the child exited: waits up to `graceMs` for the remembered processes to go, then SIGKILLs the rest. */
  reapTree(graceMs: number): Promise<void>
}

/**
 * The one way localpuppet starts puppet, git and hooks: stdin never inherited, output
 * streamed to callbacks as it comes, never rejected (the caller maps exits to results).
 * Node's own spawn, not execa: every apply starts a child, and loading execa cost about
 * 20 ms of each start-up for features this does not use.
 */
export function startChild(file: string, args: string[], options: ChildOptions = {}): Child {
  const env: NodeJS.ProcessEnv = {...process.env}
  for (const [key, value] of Object.entries(options.env ?? {})) {
    if (value === undefined) delete env[key]
    else env[key] = value
  }

  // An empty or relative PATH entry means "the current directory, wherever that is": for
  // a bare command name here, and for the child's own lookups (`#!/usr/bin/env ruby`, a
  // hook's commands). Run as root, that would run whatever someone left there.
  if (env.PATH !== undefined) env.PATH = securePath(env.PATH)
  if (!file.includes('/')) file = findExecutable(file, env) ?? file

  const stdin = options.stdinFd ?? (options.input === undefined ? 'ignore' : 'pipe')
  const subprocess = spawn(file, args, {env, cwd: options.cwd, detached: Boolean(options.ownGroup), stdio: [stdin, 'pipe', 'pipe']})
  subprocess.stdout?.on('data', (chunk: Buffer) => options.onStdout?.(chunk))
  subprocess.stderr?.on('data', (chunk: Buffer) => options.onStderr?.(chunk))
  if (options.input !== undefined && subprocess.stdin) {
    // A child that exits without reading its input is not an error here.
    subprocess.stdin.on('error', () => {})
    subprocess.stdin.end(options.input)
  }

  // A child in our own group goes when we go, exit or signal (its own group is stopped by the caller).
  const forget = options.ownGroup ? () => {} : onStop((signal) => subprocess.kill(signal ?? 'SIGTERM'))
  const exited = new Promise<ChildExit>((resolve) => {
    let spawnError: ChildExit['spawnError'] = null
    subprocess.once('error', (error: NodeJS.ErrnoException) => {
      // Could not start (ENOENT, EACCES): no exit comes, but close still does.
      if (subprocess.pid === undefined) spawnError = {code: error.code, message: error.message}
    })
    // After the process ended and its output closed (processes it left behind may hold it).
    subprocess.once('close', (exitCode: number | null, signal: NodeJS.Signals | null) => {
      forget()
      resolve(spawnError ? {exitCode: null, signal: null, spawnError} : {exitCode, signal, spawnError: null})
    })
  })

  // null when it could not start (see exited's spawnError).
  const processEnded = new Promise<{exitCode: number | null; signal: NodeJS.Signals | null} | null>((resolve) => {
    if (subprocess.pid === undefined) resolve(null)
    subprocess.once('exit', (exitCode, signal) => resolve({exitCode, signal}))
    subprocess.once('error', () => resolve(null))
  })

  const tree: ProcessId[] = []
  const remember = () => {
    if (subprocess.pid === undefined) return
    for (const found of descendants(subprocess.pid)) if (!tree.some((p) => p.pid === found.pid)) tree.push(found)
  }

  return {
    pid: subprocess.pid,
    exited,
    processEnded,
    closeOutput() {
      subprocess.stdout?.destroy()
      subprocess.stderr?.destroy()
    },
    killTree(signal, also = []) {
      const pid = subprocess.pid
      if (pid === undefined) return
      remember()
      for (const found of also) if (!tree.some((p) => p.pid === found.pid)) tree.push(found)
      try {
        if (options.ownGroup) process.kill(-pid, signal)
        else subprocess.kill(signal)
      } catch {
        // Already gone (ESRCH): what it started is signalled below all the same.
      }

      for (const p of tree) signalIfSame(p, signal)
    },
    async reapTree(graceMs) {
      const until = Date.now() + graceMs
      while (survivors(tree).length > 0 && Date.now() < until) await sleep(50)
      for (const p of survivors(tree)) signalIfSame(p, 'SIGKILL')
    },
  }
}
