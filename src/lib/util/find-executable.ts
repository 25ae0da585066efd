import {accessSync, closeSync, constants, openSync, readSync, statSync} from 'node:fs'
import {basename, delimiter, isAbsolute, join, resolve} from 'node:path'

/**
 * Finds a command the way execvp would: a name with a slash is taken as a path, a bare
 * name is looked up on PATH. Returns the absolute path, or null when nothing executable
 * is there. Only absolute PATH entries count: an empty or relative one names the current
 * directory, which is nobody's promise (see securePath).
 */
export function findExecutable(command: string, env: NodeJS.ProcessEnv = process.env): string | null {
  if (command.includes('/')) return isExecutableFile(command) ? (isAbsolute(command) ? command : resolve(command)) : null
  for (const dir of securePath(env.PATH ?? '').split(delimiter)) {
    const candidate = join(dir, command)
    if (isExecutableFile(candidate)) return candidate
  }

  return null
}

/** What PATH becomes when nothing absolute is left in it (an empty PATH is one empty entry: the current directory). */
export const DEFAULT_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'

/** PATH without its empty and relative entries, which name whatever the current directory is; DEFAULT_PATH when none is left. */
export function securePath(path: string): string {
  const kept = path.split(delimiter).filter((dir) => isAbsolute(dir))
  return kept.length > 0 ? kept.join(delimiter) : DEFAULT_PATH
}

/**
 * The interpreter a script's `#!` line runs, as an absolute path (`#!/usr/bin/env ruby`:
 * ruby as found on PATH), or null for a binary, an unreadable file or one not found.
 */
export function scriptInterpreter(script: string, env: NodeJS.ProcessEnv = process.env): {path: string | null; args: string[]} | null {
  let first = ''
  try {
    const handle = openSync(script, 'r')
    try {
      const buffer = Buffer.alloc(256)
      first = buffer.subarray(0, readSync(handle, buffer, 0, 256, 0)).toString('latin1').split('\n')[0]
    } finally {
      closeSync(handle)
    }
  } catch {
    return null
  }

  const shebang = /^#!\s*(\S+)(?:\s+(.*))?$/.exec(first)
  if (!shebang) return null
  const [interpreter, rest] = [shebang[1], shebang[2]?.trim().split(/\s+/).filter((arg) => arg !== '') ?? []]
  if (basename(interpreter) === 'env' && rest.length > 0 && !rest[0].startsWith('-')) return {path: findExecutable(rest[0], env), args: rest.slice(1)}
  return {path: isExecutableFile(interpreter) ? interpreter : null, args: rest}
}

function isExecutableFile(path: string): boolean {
  try {
    accessSync(path, constants.X_OK)
    return statSync(path).isFile()
  } catch {
    return false
  }
}
