import {readFileSync, readdirSync} from 'node:fs'

import {processStartTime} from './process.js'

/** A process, identified beyond its pid so a reused pid is never signalled by mistake. */
export interface ProcessId {
  pid: number
  start: string | null
}

/**
 * Every descendant of `root` now running (Linux /proc; empty elsewhere). Puppet starts
 * each exec resource in a session of its own (setsid), so its children are not in its
 * process group: stopping a run has to find them by parentage.
 */
export function descendants(root: number): ProcessId[] {
  const children = new Map<number, number[]>()
  let entries: string[]
  try {
    entries = readdirSync('/proc')
  } catch {
    return []
  }

  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8')
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
      children.set(ppid, [...(children.get(ppid) ?? []), Number(entry)])
    } catch {
      // The process ended while /proc was read: not a child any more.
    }
  }

  const found: ProcessId[] = []
  const queue = [...(children.get(root) ?? [])]
  while (queue.length > 0) {
    const pid = queue.shift()!
    found.push({pid, start: processStartTime(pid)})
    queue.push(...(children.get(pid) ?? []))
  }

  return found
}

/** Signals a process only if it is still the one that was seen (same start time). */
export function signalIfSame(process_: ProcessId, signal: NodeJS.Signals): boolean {
  const start = processStartTime(process_.pid)
  if (start === null || (process_.start !== null && start !== process_.start)) return false
  try {
    process.kill(process_.pid, signal)
    return true
  } catch {
    return false
  }
}

/** Those of the processes still alive (and still the same processes). */
export function survivors(processes: ProcessId[]): ProcessId[] {
  return processes.filter((p) => {
    const start = processStartTime(p.pid)
    return start !== null && (p.start === null || start === p.start) && !isZombie(p.pid)
  })
}

function isZombie(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    return stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z')
  } catch {
    return false
  }
}

/**
 * Every process of ours whose environment holds `entry` (`NAME=VALUE`): it was started,
 * however indirectly, by the process that was given that variable, even after `setsid`
 * and a parent's exit reparented it away from the tree.
 */
export function processesWithEnv(entry: string): ProcessId[] {
  const needle = Buffer.from(`\0${entry}\0`)
  const found: ProcessId[] = []
  let entries: string[]
  try {
    entries = readdirSync('/proc')
  } catch {
    return []
  }

  for (const name of entries) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue
    try {
      const environ = Buffer.concat([Buffer.from([0]), readFileSync(`/proc/${name}/environ`)])
      if (environ.includes(needle)) found.push({pid: Number(name), start: processStartTime(Number(name))})
    } catch {
      // Ended meanwhile, or another user's (environ unreadable): not one of ours.
    }
  }

  return found
}
