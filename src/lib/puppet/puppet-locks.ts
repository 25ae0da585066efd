import {readFileSync} from 'node:fs'
import {link, mkdir, readFile, unlink, writeFile} from 'node:fs/promises'
import {dirname} from 'node:path'

import {LockHeldError, PuppetDisabledError} from '../errors.js'
import {isProcessAlive} from '../util/process.js'
import {findTrustProblem} from '../util/trusted-path.js'
import {findPuppet} from './puppet-identity.js'
import {type PuppetLockPaths, puppetLockPaths} from './puppet-paths.js'

/** The message `puppet agent --disable "msg"` (or `localpuppet disable`) left, or null when enabled. */
export async function disabledMessage(paths: PuppetLockPaths): Promise<string | null> {
  let text: string
  try {
    text = await readFile(paths.disabled, 'utf8')
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null
    throw error
  }

  try {
    const message = (JSON.parse(text) as {disabled_message?: unknown}).disabled_message
    return typeof message === 'string' && message !== '' ? message : 'reason not specified'
  } catch {
    return 'reason not specified'
  }
}

/** Refuses (73) when Puppet is disabled, showing the message it was disabled with. */
export async function assertEnabled(paths: PuppetLockPaths): Promise<void> {
  const message = await disabledMessage(paths)
  if (message !== null) {
    throw new PuppetDisabledError(`puppet is disabled: ${message}`)
  }
}

/** Writes the disable lock as Puppet does: JSON with the message. */
export async function disablePuppet(paths: PuppetLockPaths, message: string): Promise<void> {
  await mkdir(dirname(paths.disabled), {recursive: true})
  await writeFile(paths.disabled, JSON.stringify({disabled_message: message}) + '\n', {mode: 0o644})
}

/** Removes the disable lock; true when there was one. */
export async function enablePuppet(paths: PuppetLockPaths): Promise<boolean> {
  try {
    await unlink(paths.disabled)
    return true
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return false
    throw error
  }
}

/**
 * Holds Puppet's agent_catalog_run lock (our pid in it, as `puppet agent` writes its
 * own) while a catalog is applied, so Puppet-aware tooling sees the node as busy. A lock
 * whose process is alive means a `puppet agent` run is under way: 73.
 */
export async function holdCatalogRunLock(paths: PuppetLockPaths): Promise<() => Promise<void>> {
  const path = paths.catalogRun
  await mkdir(dirname(path), {recursive: true})
  const temp = `${path}.${process.pid}.tmp`
  try {
    await writeFile(temp, String(process.pid))
    for (let attempt = 0; attempt < 3; attempt++) {
      try {
        await link(temp, path)
        return async () => {
          const current = await readFile(path, 'utf8').catch(() => '')
          if (current.trim() === String(process.pid)) await unlink(path).catch(() => {})
        }
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
      }

      const holder = Number((await readFile(path, 'utf8').catch(() => '')).trim())
      if (Number.isInteger(holder) && holder > 0 && isProcessAlive(holder) && looksLikePuppet(holder)) {
        throw new LockHeldError(`a Puppet catalog run is in progress (pid ${holder}, ${path})`, {pid: holder, runId: null})
      }

      await unlink(path).catch(() => {})
    }

    throw new LockHeldError(`could not take Puppet's lock ${path}`, {pid: 0, runId: null})
  } finally {
    await unlink(temp).catch(() => {})
  }
}

/**
 * The lock lives under Puppet's vardir and survives a reboot: a pid in it may since
 * belong to anything. Only a puppet (ruby) or localpuppet (node) process holds it; where
 * /proc cannot tell, assume it does.
 */
function looksLikePuppet(pid: number): boolean {
  try {
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8')
    return /puppet|ruby|node/.test(cmdline)
  } catch {
    return true
  }
}

/**
 * Whether Puppet is disabled, for status and metrics: `{message}`, or null when it is not
 * or cannot be told (puppet missing or untrusted: nothing would run anyway, and apply says so).
 */
export async function disabledState(puppet: string, puppetArgs: string[], stateDir: string): Promise<{message: string} | null> {
  // No state directory is made for this: status must not write.
  const path = findPuppet(puppet)
  // Missing, or one others could rewrite: not run to ask (apply refuses it anyway).
  if (path === null || findTrustProblem(path, {what: 'puppet executable'}) !== null) return null
  try {
    const message = await disabledMessage(await puppetLockPaths(path, puppetArgs, stateDir))
    return message === null ? null : {message}
  } catch {
    return null
  }
}
