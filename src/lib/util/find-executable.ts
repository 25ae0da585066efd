import {accessSync, constants, statSync} from 'node:fs'
import {delimiter, isAbsolute, join, resolve} from 'node:path'

/**
 * Finds a command the way execvp would: a name with a slash is taken as a path, a bare
 * name is looked up on PATH. Returns the absolute path, or null when nothing executable
 * is there. Only absolute PATH entries count: an empty or relative one names the current
 * directory, which is nobody's promise (see securePath).
 */
export function findExecutable(command: string, env: NodeJS.ProcessEnv = process.env): string | null {
  if (command.includes('/')) return isExecutableFile(command) ? (isAbsolute(command) ? command : resolve(command)) : null
  for (const dir of (env.PATH ?? '').split(delimiter)) {
    if (!isAbsolute(dir)) continue
    const candidate = join(dir, command)
    if (isExecutableFile(candidate)) return candidate
  }

  return null
}

/** PATH without its empty and relative entries, which name whatever the current directory is. */
export function securePath(path: string): string {
  return path
    .split(delimiter)
    .filter((dir) => isAbsolute(dir))
    .join(delimiter)
}

function isExecutableFile(path: string): boolean {
  try {
    accessSync(path, constants.X_OK)
    return statSync(path).isFile()
  } catch {
    return false
  }
}
