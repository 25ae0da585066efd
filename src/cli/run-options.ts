import {settingList} from '../lib/config/settings.js'
import type {AttemptOptions, RunOptions} from '../lib/attempt/options.js'
import {defaultStateDir} from '../lib/state/state-dir.js'

/** The flags plan and apply share. */
export interface RunFlagValues {
  'module-dir': string
  layers?: string | null
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

/** apply's and rollback's flags (see attemptFlags), with --app and --replay. */
export type AttemptFlagValues = RunFlagValues & {
  'if-changed': boolean
  'max-age'?: string
  splay?: number
  'on-finish'?: string
  keep: number
  save: boolean
  detach: boolean
  'metrics-file'?: string
  app?: string
  replay?: string
}

/** plan's flags as the library's run options. */
export function runOptions(flags: RunFlagValues & {app?: string; replay?: string}, puppetArgs: string[], color: boolean): RunOptions {
  return {
    moduleDir: flags['module-dir'],
    ...(flags.layers ? {layersDir: flags.layers} : {}),
    stateDir: flags['state-dir'] ?? defaultStateDir(),
    manifest: flags.manifest,
    puppet: flags.puppet,
    puppetArgs,
    noop: flags.noop,
    detailedExitcodes: flags['detailed-exitcodes'],
    facts: flags.fact ?? [],
    timeoutSeconds: flags.timeout,
    allowMutable: flags['allow-mutable'],
    allowUntrusted: Boolean(flags['allow-untrusted']),
    fetch: flags.fetch ? {source: flags.source, trust: flags.trust, insecure: flags.insecure} : undefined,
    color,
    app: flags.app,
    replay: flags.replay,
  }
}

/** apply's and rollback's flags as the library's attempt options. */
export function attemptOptions(flags: AttemptFlagValues, puppetArgs: string[], color: boolean): AttemptOptions {
  return {
    ...runOptions(flags, puppetArgs, color),
    keepFetchedInput: true,
    save: flags.save,
    detach: flags.detach,
    ifChanged: flags['if-changed'],
    maxAge: flags['max-age'],
    splaySeconds: flags.splay,
    onFinish: flags['on-finish'],
    keep: flags.keep,
    metricsFile: flags['metrics-file'],
  }
}

/** Puppet's arguments: those after `--` when given, else the puppet_args setting. */
export async function resolvePuppetArgs(passThrough: string[]): Promise<string[]> {
  return passThrough.length > 0 ? passThrough : settingList('puppet_args')
}
