import {accessSync, constants, statSync} from 'node:fs'
import {delimiter, isAbsolute, join, resolve} from 'node:path'

/**
 * Finds a command the way execvp would: a name with a slash is taken as a path, a bare
 * name is looked up on PATH. Returns the absolute path, or null when nothing executable
 * is there.
 */
export function findExecutable(command: string, env: NodeJS.ProcessEnv = process.env): string | null {
  if (command.includes('/')) return isExecutableFile(command) ? (isAbsolute(command) ? command : resolve(command)) : null
  for (const dir of (env.PATH ?? '').split(delimiter)) {
    if (dir === '') continue
    const candidate = join(dir, command)
    if (isExecutableFile(candidate)) return isAbsolute(candidate) ? candidate : resolve(candidate)
  }

  return null
}

function isExecutableFile(path: string): boolean {
  try {
    accessSync(path, constants.X_OK)
    return statSync(path).isFile()
  } catch {
    return false
  }
}
