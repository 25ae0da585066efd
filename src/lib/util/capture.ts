import {startChild} from './child.js'

export interface Captured {
  /** null when killed by a signal or when it could not start (see spawnError). */
  exitCode: number | null
  stdout: string
  stderr: string
  spawnError: {code: string | undefined; message: string} | null
}

/** Runs a tool to completion through the one child-process wrapper, keeping its output. */
export async function capture(file: string, args: string[], options: {env?: Record<string, string | undefined>; cwd?: string} = {}): Promise<Captured> {
  const out: Buffer[] = []
  const err: Buffer[] = []
  const child = startChild(file, args, {...options, onStdout: (chunk) => out.push(chunk), onStderr: (chunk) => err.push(chunk)})
  const exit = await child.exited
  return {exitCode: exit.exitCode, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8'), spawnError: exit.spawnError}
}
