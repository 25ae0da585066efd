import {mkdir} from 'node:fs/promises'

import {PuppetUnavailableError} from '../errors.js'
import {assertTrustedPaths, findTrustProblem} from '../util/trusted-path.js'
import {assertStateDirShape} from '../state/state-dir.js'
import {findPuppet} from './puppet-identity.js'
import {disablePuppet, disabledMessage, enablePuppet} from './puppet-locks.js'
import {puppetLockPaths} from './puppet-paths.js'

export interface AgentLockState {
  disabled: boolean
  message: string | null
  lockfile: string
  /** What --allow-untrusted let through (the state dir, the puppet executable). */
  untrusted: string[]
}

async function paths(puppet: string, puppetArgs: string[], stateDir: string, allowUntrusted = false) {
  const path = findPuppet(puppet)
  if (path === null) throw new PuppetUnavailableError(`puppet not found: ${puppet}`)
  // Asking Puppet where its locks are runs it, as root.
  const untrusted = assertTrustedPaths([{path: stateDir, what: 'state directory'}, {path, what: 'puppet executable', content: true}], allowUntrusted)
  assertStateDirShape(stateDir)
  await mkdir(stateDir, {recursive: true, mode: 0o700})
  return {lockPaths: await puppetLockPaths(path, puppetArgs, stateDir), untrusted}
}

/** `localpuppet disable MESSAGE`: what `puppet agent --disable MESSAGE` does. */
export async function disableRuns(puppet: string, puppetArgs: string[], stateDir: string, message: string, allowUntrusted = false): Promise<AgentLockState> {
  const {lockPaths, untrusted} = await paths(puppet, puppetArgs, stateDir, allowUntrusted)
  await disablePuppet(lockPaths, message)
  return {disabled: true, message, lockfile: lockPaths.disabled, untrusted}
}

/** `localpuppet enable`: what `puppet agent --enable` does. */
export async function enableRuns(puppet: string, puppetArgs: string[], stateDir: string, allowUntrusted = false): Promise<AgentLockState & {wasDisabled: boolean}> {
  const {lockPaths, untrusted} = await paths(puppet, puppetArgs, stateDir, allowUntrusted)
  const message = await disabledMessage(lockPaths)
  const wasDisabled = await enablePuppet(lockPaths)
  return {disabled: false, message, lockfile: lockPaths.disabled, wasDisabled, untrusted}
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
