import {randomBytes} from 'node:crypto'
import {readdir, rm} from 'node:fs/promises'
import {join} from 'node:path'

import {isProcessAlive, processStartTime} from '../util/process.js'
import {localpuppetDir} from './install-record.js'

/**
 * Where a fetch downloads archives before installing them: the module directory's
 * `.localpuppet/downloads/`, one file per download, named by the process writing it (its
 * pid and start time, so a reused pid is not taken for it) and a random part.
 */
export function downloadsDir(moduleDir: string): string {
  return join(localpuppetDir(moduleDir), 'downloads')
}

/** A new download's path in `downloads`: `<pid>-<start time>-<random>.tar.gz` (start time 0 where the system does not give one). */
export function downloadPath(downloads: string): string {
  return join(downloads, `${process.pid}-${processStartTime(process.pid) ?? '0'}-${randomBytes(4).toString('hex')}.tar.gz`)
}

/** `<pid>-<start>-<hex>.tar.gz`, or the older `<pid>-<hex>.tar.gz` (no start time). */
const DOWNLOAD_NAME = /^(\d+)-(?:(\d+)-)?[0-9a-f]{8}\.tar\.gz$/

/**
 * Removes the downloads of fetches that died (killed with SIGKILL, or by their unit's
 * timeout, they had no chance to remove their own: an archive may be gigabytes): each whose
 * process is gone, or whose pid now belongs to a process started at another time. A
 * download a live fetch is writing is left alone, as is anything not named like a download.
 * Gives the names removed; never fails the fetch (a file it cannot remove stays for the next).
 */
export async function removeAbandonedDownloads(moduleDir: string): Promise<string[]> {
  const dir = downloadsDir(moduleDir)
  const names = await readdir(dir).catch(() => [] as string[])
  const removed: string[] = []
  for (const name of names) {
    const match = DOWNLOAD_NAME.exec(name)
    if (!match || !isAbandoned(Number(match[1]), match[2])) continue
    // Not recursive: only a file (or a link: removed, never followed) goes.
    if (await rm(join(dir, name), {force: true}).then(() => true, () => false)) removed.push(name)
  }

  return removed
}

function isAbandoned(pid: number, start: string | undefined): boolean {
  if (!isProcessAlive(pid)) return true
  // Alive: abandoned only when the pid is provably another process's now (its start time differs).
  if (start === undefined || start === '0') return false
  const now = processStartTime(pid)
  return now !== null && now !== start
}
