import {UsageError} from '../errors.js'
import type {ApplyOptions} from '../run/apply-run.js'
import type {PlanOptions, RunFetch} from '../run/run-plan.js'
import type {ConfiguredFetch} from '../source/fetch.js'

/** What decides the plan of a run: plan's options, and apply's and rollback's. */
export interface RunOptions {
  moduleDir: string
  /** --layers (the layers_dir setting): where the layers an input names are; unset, layers/ beside the input file. */
  layersDir?: string
  stateDir: string
  manifest?: string
  puppet: string
  /** Puppet's arguments: those after `--`, else the puppet_args setting (see resolvePuppetArgs). */
  puppetArgs: string[]
  noop: boolean
  detailedExitcodes: boolean
  /** --fact, as given: NAME=VALUE. */
  facts: string[]
  timeoutSeconds?: number
  allowMutable: boolean
  allowUntrusted: boolean
  /** --fetch: where from (the settings fill in what is not given); absent without --fetch. */
  fetch?: Omit<ConfiguredFetch, 'moduleDir' | 'allowUntrusted'>
  /** Let puppet colour its output: a terminal watches it. */
  color: boolean
  /** --app: this release instead of the input's. */
  app?: string
  /** --replay: exactly what that run applied. */
  replay?: string
  /** With --fetch and input_from: repository, write the node's fetched input over the input file (apply; plan writes none). */
  keepFetchedInput?: boolean
}

/** One attempt's options: what decides its plan, and what apply does around the run. */
export interface AttemptOptions extends RunOptions {
  /** --save: the input's app follows this run's release once the run succeeded (refused with --noop). */
  save: boolean
  /** --detach: check what can fail fast, then run in the background. */
  detach: boolean
  /** --if-changed, and --max-age as given. */
  ifChanged: boolean
  maxAge?: string
  splaySeconds?: number
  /** --on-finish: a shell command told of the final record, refused attempts too. */
  onFinish?: string
  /** Run directories to keep. */
  keep: number
  /** Where the node's metrics are rewritten after the attempt; none when absent. */
  metricsFile?: string
}

/**
 * Combinations of options no attempt takes (64, never recorded): --save with --noop, since
 * a dry run must never change what the node's next run applies.
 */
export function assertAttemptUsage(options: Pick<AttemptOptions, 'save' | 'noop'>): void {
  if (options.save && options.noop) throw new UsageError("--save with --noop: a dry run must not change the node's release; drop --save (or --noop)")
}

/**
 * --fetch --save on a node whose input comes from the repository (input_from: repository)
 * would pin the input just kept from it, which the next apply --fetch replaces with the
 * published one without a word: 64, before anything runs, saying where the change belongs.
 */
export async function assertSaveKeepsInput(options: Pick<AttemptOptions, 'save' | 'fetch'>): Promise<void> {
  if (!options.save || !options.fetch) return
  const {nodeIdentity} = await import('../config/node-identity.js')
  const identity = await nodeIdentity()
  if (identity.inputFrom !== 'repository') return
  throw new UsageError(`--fetch --save: this node's input comes from the repository (input_from: repository); its next apply --fetch would replace the saved app with the published input`, [
    `change the published input instead: localpuppet publish --node ${identity.node} --input FILE --repo DIR (or promote its channel); or run once without --save (--app RELEASE)`,
  ])
}

/** The library's plan options for a run's options. */
export function planOptions(options: RunOptions, facts: Record<string, string>, fetched: RunFetch | null = null): PlanOptions {
  return {
    fetched,
    moduleDir: options.moduleDir,
    stateDir: options.stateDir,
    manifest: options.manifest,
    puppet: options.puppet,
    noop: options.noop,
    color: options.color,
    detailedExitcodes: options.detailedExitcodes,
    facts,
    allowMutable: options.allowMutable,
    timeoutSeconds: options.timeoutSeconds,
    puppetArgs: options.puppetArgs,
    allowUntrusted: options.allowUntrusted,
    ...(options.layersDir ? {layersDir: options.layersDir} : {}),
  }
}

/** apply's run options for an attempt: --if-changed, --splay, --on-finish, --keep, and --save's rewrite. */
export async function applyOptions(input: string, options: AttemptOptions, maxAgeMs: number | undefined): Promise<ApplyOptions> {
  const apply: ApplyOptions = {ifChanged: options.ifChanged, maxAgeMs, splaySeconds: options.splaySeconds, onFinish: options.onFinish, keep: options.keep}
  if (options.save) {
    const {saveInputApp} = await import('../input/save-app.js')
    apply.save = (release) => saveInputApp(input, release)
  }

  return apply
}
