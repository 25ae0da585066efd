import {setTimeout as sleep} from 'node:timers/promises'

import {execa} from 'execa'

import {type ProcessId, descendants, signalIfSame, survivors} from '../util/process-tree.js'

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
 */
export function startChild(file: string, args: string[], options: ChildOptions = {}): Child {
  const subprocess = execa(file, args, {
    env: options.env,
    extendEnv: true,
    cwd: options.cwd,
    detached: Boolean(options.ownGroup),
    cleanup: !options.ownGroup,
    reject: false,
    buffer: false,
    stripFinalNewline: false,
    // execa takes a file descriptor as it is (its types do not say so in this union).
    stdin: (options.stdinFd ?? (options.input === undefined ? 'ignore' : 'pipe')) as 'pipe',
    ...(options.input === undefined ? {} : {input: options.input}),
    stdout: 'pipe',
    stderr: 'pipe',
  })
  subprocess.stdout?.on('data', (chunk: Buffer) => options.onStdout?.(chunk))
  subprocess.stderr?.on('data', (chunk: Buffer) => options.onStderr?.(chunk))

  const exited = subprocess.then((result) => {
    const spawnFailed = result.failed && result.exitCode === undefined && result.signal === undefined
    return {
      exitCode: result.exitCode ?? null,
      signal: (result.signal as NodeJS.Signals | undefined) ?? null,
      spawnError: spawnFailed ? {code: result.code, message: result.originalMessage ?? result.shortMessage ?? 'could not start'} : null,
    }
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
      } catch {}

      for (const p of tree) signalIfSame(p, signal)
    },
    async reapTree(graceMs) {
      const until = Date.now() + graceMs
      while (survivors(tree).length > 0 && Date.now() < until) await sleep(50)
      for (const p of survivors(tree)) signalIfSame(p, 'SIGKILL')
    },
  }
}
