import {mkdir} from 'node:fs/promises'

import {PuppetUnavailableError} from '../errors.js'
import {assertTrustedPaths} from '../util/trusted-path.js'
import {assertStateDirShape} from '../state/state-dir.js'
import {findPuppet} from '../puppet/puppet-identity.js'
import {disablePuppet, disabledMessage, enablePuppet} from '../puppet/puppet-locks.js'
import {puppetLockPaths} from '../puppet/puppet-paths.js'

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
