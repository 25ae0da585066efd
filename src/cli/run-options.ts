import {settingList} from '../lib/config/settings.js'
import type {PlanOptions, RunFetch} from '../lib/run/run-plan.js'
import {defaultStateDir} from '../lib/state/state-dir.js'

/** The flags plan and apply share, as the library's PlanOptions. */
export interface RunFlagValues {
  'module-dir': string
  manifest?: string
  'state-dir'?: string
  puppet: string
  noop: boolean
  'detailed-exitcodes': boolean
  fact?: string[]
  timeout?: number
  'allow-mutable': boolean
  'allow-untrusted'?: boolean
  fetch: boolean
  source?: string
  trust?: string[]
  insecure: boolean
}

export function toPlanOptions(flags: RunFlagValues, puppetArgs: string[], facts: Record<string, string>, color: boolean, fetched: RunFetch | null = null): PlanOptions {
  return {
    fetched,
    moduleDir: flags['module-dir'],
    stateDir: flags['state-dir'] ?? defaultStateDir(),
    manifest: flags.manifest,
    puppet: flags.puppet,
    noop: flags.noop,
    color,
    detailedExitcodes: flags['detailed-exitcodes'],
    facts,
    allowMutable: flags['allow-mutable'],
    timeoutSeconds: flags.timeout,
    puppetArgs,
    allowUntrusted: flags['allow-untrusted'],
  }
}

/** Puppet's arguments: those after `--` when given, else the puppet_args setting. */
export async function resolvePuppetArgs(passThrough: string[]): Promise<string[]> {
  return passThrough.length > 0 ? passThrough : settingList('puppet_args')
}
