import {readFileSync} from 'node:fs'

/**
 * True when a process with this pid exists and has not ended (EPERM means it exists but is
 * not ours). A zombie has ended: only its exit status waits for a parent that may never
 * reap it (an orphan whose new parent does not), so it counts as gone.
 */
export function isProcessAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false
  try {
    process.kill(pid, 0)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EPERM') return false
  }

  return !isZombie(pid)
}

function isZombie(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    // The state follows the command name, which is in parentheses and may hold anything.
    return stat.charAt(stat.lastIndexOf(')') + 2) === 'Z'
  } catch {
    return false
  }
}

/**
 * The process's start time in clock ticks since boot (Linux /proc/PID/stat field 22), or
 * null elsewhere. With the pid it identifies a process even after the pid is reused.
 */
export function processStartTime(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    // The command name (field 2) may hold spaces and parentheses: split after the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return fields[19] ?? null
  } catch {
    return null
  }
}
