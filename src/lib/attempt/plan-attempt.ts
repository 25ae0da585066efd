import type {NodeInput} from '../input/node-input.js'
import {type RunFetch, type RunPlan, buildRunPlan} from '../run/run-plan.js'
import type {ReleaseRef} from '../release/release-ref.js'
import type {FetchResult} from '../source/release-source.js'
import {type RunOptions, planOptions} from './options.js'

/** How a plan talks to the person who asked for it; every member is optional (--json: none). */
export interface PlanIo {
  /** Standard input, for the input `-`. */
  stdin: NodeJS.ReadableStream
  /** --fetch's downloads as they go: for a terminal. */
  progress?: {update(progress: {release: string; bytes: number; total: number}): void; done(): void}
  /** What --fetch brought, once it is installed. */
  fetched?(result: FetchResult): void
}

/** A plan, and what was read on the way to it (for the run record and the background half of --detach). */
export interface PlannedAttempt {
  plan: RunPlan
  /** The input as parsed (with --app and a fetched tag applied); absent for --replay. */
  input?: NodeInput
  /** The input's text as read. */
  inputText?: string
  /** What --allow-untrusted let through before the plan (the input file, an unsigned repository's place). */
  untrusted: string[]
  /** What --fetch brought, and the tag its reference was pinned to. */
  fetched: {fetched: RunFetch; release: string} | null
}

/**
 * The plan `plan` prints and `apply` executes: the input (judged before it is read: one
 * others can write is 77), --app, --fetch (a range pinned to the tag fetched), the release
 * resolved and verified; or, for --replay, exactly what that run applied. `onInput` sees
 * the input as soon as it is parsed, so that a refusal after it records what it was.
 */
export async function planAttempt(inputPath: string, options: RunOptions, facts: Record<string, string>, io: PlanIo, runId?: string, onInput?: (input: NodeInput) => void): Promise<PlannedAttempt> {
  if (options.replay) {
    const [{buildReplayPlan}, {assertRunId}] = await Promise.all([import('../run/replay.js'), import('../state/run-id.js')])
    return {plan: await buildReplayPlan(assertRunId(options.replay), planOptions(options, facts), runId!), untrusted: [], fetched: null}
  }

  const [{readInputText}, {parseNodeInput}, {parseReleaseRef}] = await Promise.all([
    import('../input/read-input.js'),
    import('../input/node-input.js'),
    import('../release/release-ref.js'),
  ])
  const {text, source, untrusted} = await readInputText(inputPath, io.stdin, {allow: options.allowUntrusted})
  let input = parseNodeInput(text, source)
  onInput?.(input)
  if (options.app !== undefined) onInput?.((input = {...input, app: parseReleaseRef(options.app, '--app')}))
  const before = [...untrusted]
  let fetched: PlannedAttempt['fetched'] = null
  if (options.fetch) {
    const result = await fetchForRun(input.app, options, io)
    fetched = {fetched: toRunFetch(result), release: result.releases[0].release}
    // What --allow-untrusted let through while fetching (an unsigned repository others can write): the plan records it.
    before.push(...(result.untrusted ?? []))
    onInput?.((input = await pinInput(input, fetched.release)))
  }

  const plan = await buildRunPlan(input, {...planOptions(options, facts, fetched?.fetched), untrusted: before}, runId)
  return {plan, input, inputText: text, untrusted: before, fetched}
}

/** The input with its app pinned to a fetched release: a range means the repository's newest match, not the node's. */
export async function pinInput<T extends {app: ReleaseRef}>(input: T, release: string | undefined): Promise<T> {
  const {pinToRelease} = await import('../source/fetch.js')
  return {...input, app: pinToRelease(input.app, release)}
}

async function fetchForRun(app: ReleaseRef, options: RunOptions, io: PlanIo): Promise<FetchResult> {
  const {fetchConfigured} = await import('../source/fetch.js')
  const fetch = {...options.fetch!, moduleDir: options.moduleDir, allowUntrusted: options.allowUntrusted}
  let result: FetchResult
  try {
    result = await fetchConfigured([app.text], fetch, {onProgress: io.progress ? (progress) => io.progress!.update(progress) : undefined})
  } finally {
    io.progress?.done()
  }

  io.fetched?.(result)
  return result
}

function toRunFetch(result: FetchResult): RunFetch {
  return {source: result.source, releases: result.releases.map(({release, status, bytes}) => ({release, status, bytes}))}
}
