import {execa} from 'execa'

export interface ChildOptions {
  env?: Record<string, string>
  cwd?: string
  /** Its own process group, so it can be stopped as a whole and a terminal's ^C reaches only us. */
  ownGroup?: boolean
  onStdout?: (chunk: Buffer) => void
  onStderr?: (chunk: Buffer) => void
  /** Data written to the child's stdin, then closed; otherwise stdin is /dev/null. */
  input?: string
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
  /** Sends a signal to the child, or to its whole process group when it has one. */
  kill(signal: NodeJS.Signals): void
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
    stdin: options.input === undefined ? 'ignore' : 'pipe',
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

  return {
    pid: subprocess.pid,
    exited,
    kill(signal) {
      const pid = subprocess.pid
      if (pid === undefined) return
      try {
        if (options.ownGroup) process.kill(-pid, signal)
        else subprocess.kill(signal)
      } catch {}
    },
  }
}
