import {LocalpuppetError, NotFoundError} from '../errors.js'
import type {NodeInput} from '../input/node-input.js'
import {type PlanOptions, type RunFetch, type RunPlan, buildRunPlan} from '../run/run-plan.js'
import type {ReleaseRef} from '../release/release-ref.js'
import type {FetchOptions, FetchResult} from '../source/release-source.js'
import type {ConfiguredFetch} from '../source/fetch.js'
import type {NodeFetch} from '../source/node-input-fetch.js'
import type {NodeIdentity} from '../config/node-identity.js'
import {redactUrl} from '../util/terminal-text.js'
import {keptLayersDir} from '../layers/fetch-layers.js'
import {layersDirFor} from '../layers/run-layers.js'
import {type RunOptions, planOptions} from './options.js'
import {signedExpiry} from '../state/run-record.js'

/** How a plan talks to the person who asked for it; every member is optional (--json: none). */
export interface PlanIo {
  /** Standard input, for the input `-`. */
  stdin: NodeJS.ReadableStream
  /** --fetch's downloads as they go: for a terminal. */
  progress?: {update(progress: {release: string; bytes: number; total: number}): void; done(): void}
  /** What --fetch brought, once it is installed. */
  fetched?(result: FetchResult): void
  /** A warning for a person (the source could not be reached: the installed release runs). */
  warn?(line: string): void
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
  /** What --fetch brought, and the tag its reference was pinned to (none when it fell back to what is installed). */
  fetched: {fetched: RunFetch; release?: string} | null
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

  const [{readInputText}, {parseNodeInput}, {parseReleaseRef}, {nodeIdentity}] = await Promise.all([
    import('../input/read-input.js'),
    import('../input/node-input.js'),
    import('../release/release-ref.js'),
    import('../config/node-identity.js'),
  ])
  const before: string[] = []
  let fetched: PlannedAttempt['fetched'] = null
  let unreachable: LocalpuppetError | null = null
  let text: string | undefined
  let input: NodeInput | undefined
  // Where the input's layers come from: --layers (layers_dir), else layers/ beside the input; the fetched ones for a repository's input.
  let layers: PlanOptions['layersDir'] = layersDirFor(options, inputPath)
  const identity = options.fetch ? await nodeIdentity() : null
  if (identity?.inputFrom === 'repository') {
    // Its layers are the repository's, kept beside the input (what a run without the repository merges).
    layers = keptLayersDir(inputPath)
    // The node's input and its release from one read of the signed index; unreachable: the input file as last kept.
    let seen = false
    const result = await fetchForNode(inputPath, identity, options, io, (parsed) => {
      seen = true
      onInput?.(parsed)
    }).catch(async (error: unknown) => {
      // Refused before its input was had (tampered, unsigned, not listed): the input kept last
      // time still says what the node follows (its channel), for the record and the metrics.
      if (!seen && onInput) {
        const kept = await readInputText(inputPath, io.stdin, {allow: options.allowUntrusted}).then((read) => parseNodeInput(read.text, read.source), () => undefined)
        if (kept) onInput(kept)
      }

      throw error
    })
    if ('unreachable' in result) {
      unreachable = result.unreachable
      fetched = {fetched: fallbackFetch(result)}
    } else {
      ;({text, input} = result)
      if (result.layers) layers = result.layers
      onInput?.(input)
      if (options.app !== undefined) onInput?.((input = {...input, app: parseReleaseRef(options.app, '--app')}))
      fetched = {fetched: {...toRunFetch(result.result), input: result.nodeInput}, release: result.result.releases[0].release}
      before.push(...(result.result.untrusted ?? []))
      onInput?.((input = await pinInput(input, fetched.release)))
    }
  }

  if (input === undefined) {
    const read = await readInputText(inputPath, io.stdin, {allow: options.allowUntrusted}).catch((error: unknown) => {
      // The repository unreachable and no input kept from it yet: the fetch's failure (69) is the answer.
      if (unreachable && error instanceof NotFoundError) throw new LocalpuppetError(unreachable.code, unreachable.exitCode, `${unreachable.message}; and no input kept here yet: ${error.message}`, unreachable.suggestions)
      throw error
    })
    // The kept copy of an encrypted input is the ciphertext: opened again with the node's key for each run.
    const {openNodeDocument} = await import('../secrets/open-input.js')
    text = (await openNodeDocument(read.text, read.source, options.stateDir)).text
    before.push(...read.untrusted)
    input = parseNodeInput(text, read.source)
    onInput?.(input)
    if (options.app !== undefined) onInput?.((input = {...input, app: parseReleaseRef(options.app, '--app')}))
    if (options.fetch && !unreachable) {
      const result = await fetchForRun(input.app, options, io)
      if ('unreachable' in result) {
        // The repository cannot be reached: a timer fleet keeps enforcing what it has. The
        // input's release resolves among the installed tags, verified as for any run.
        unreachable = result.unreachable
        fetched = {fetched: fallbackFetch(result)}
      } else {
        fetched = {fetched: toRunFetch(result), release: result.releases[0].release}
        // What --allow-untrusted let through while fetching (an unsigned repository others can write): the plan records it.
        before.push(...(result.untrusted ?? []))
        onInput?.((input = await pinInput(input, fetched.release)))
      }
    }
  }

  let plan: RunPlan
  try {
    plan = await buildRunPlan(input, {...planOptions(options, facts, fetched?.fetched), untrusted: before, layersDir: layers}, runId)
  } catch (error) {
    // Nothing installed to fall back on: the fetch's own failure (69) is the answer.
    if (unreachable && error instanceof NotFoundError) throw new LocalpuppetError(unreachable.code, unreachable.exitCode, `${unreachable.message}; and nothing installed here to fall back on: ${error.message}`, unreachable.suggestions)
    throw error
  }

  if (unreachable) {
    const refused = signedExpiry(fetched?.fetched) ? ': nothing new is taken from it' : ''
    io.warn?.(`--fetch: ${unreachable.message}${refused}; applying ${plan.release} as installed here (verified)`)
  }

  return {plan, input, inputText: text, untrusted: before, fetched}
}

/** The input with its app pinned to a fetched release: a range means the repository's newest match, not the node's. */
export async function pinInput<T extends {app: ReleaseRef}>(input: T, release: string | undefined): Promise<T> {
  const {pinToRelease} = await import('../source/fetch.js')
  return {...input, app: pinToRelease(input.app, release)}
}

/** A source that could not be reached (69), or whose index had expired (65, `expires` says when): the run falls back to what is installed. */
type Unreachable = {unreachable: LocalpuppetError; source: string; expires?: string; nodeDocument?: {version: number | null}}

/** The run record's fetch for a fallback: why, and the expired index's date (for the expiry metric and status --check). */
function fallbackFetch(result: Unreachable): RunFetch {
  // A node's own document that expired is named as such (nodeDocument), as a fetch that read one is: indexExpires is the index's.
  const expiry = result.expires ? (result.nodeDocument ? {nodeDocument: {...result.nodeDocument, expires: result.expires}} : {indexExpires: result.expires}) : {}
  return {source: result.source, releases: [], error: result.unreachable.message, fallback: true, ...expiry}
}

/** input_from: repository: the node's input and its release, or, when the source could not be reached (69), that error and the source. */
async function fetchForNode(inputPath: string, identity: NodeIdentity, options: RunOptions, io: PlanIo, onInput: (input: NodeInput) => void): Promise<NodeFetch | Unreachable> {
  const {fetchNodeInput} = await import('../source/node-input-fetch.js')
  return guardedFetch(options, io, (fetch, onProgress) => fetchNodeInput(inputPath, identity, fetch, {keep: options.keepFetchedInput === true, onProgress, onInput, stateDir: options.stateDir}), (result) => result.result)
}

/** The fetch before a run: what it brought, or, when the source could not be reached (69), that error and the source. */
async function fetchForRun(app: ReleaseRef, options: RunOptions, io: PlanIo): Promise<FetchResult | Unreachable> {
  const {fetchConfigured} = await import('../source/fetch.js')
  return guardedFetch(options, io, (fetch, onProgress) => fetchConfigured([app.text], fetch, {onProgress}), (result) => result)
}

/** Runs a fetch with the run's source settings and progress; an unreachable source (69) is returned, not thrown; what it brought is told to `io`. */
async function guardedFetch<T>(
  options: RunOptions,
  io: PlanIo,
  run: (fetch: ConfiguredFetch, onProgress: FetchOptions['onProgress']) => Promise<T>,
  fetched: (result: T) => FetchResult,
): Promise<T | Unreachable> {
  const [{configuredSource, isUnreachable}, {IndexExpiredError}] = await Promise.all([import('../source/fetch.js'), import('../source/accepted-versions.js')])
  const fetch = {...options.fetch!, moduleDir: options.moduleDir, allowUntrusted: options.allowUntrusted}
  let result: T
  try {
    result = await run(fetch, io.progress ? (progress) => io.progress!.update(progress) : undefined)
  } catch (error) {
    // An expired index is refused (nothing is installed or remembered from it), but the node
    // keeps enforcing the release it installed and verified: a fleet whose re-signing broke
    // must not stop enforcing. Every other refusal (a replay, a bad signature) stops the run.
    if (!isUnreachable(error) && !(error instanceof IndexExpiredError)) throw error
    // As the run record names it: without the URL's credentials.
    return {unreachable: error, source: redactUrl(await configuredSource(fetch)), ...(error instanceof IndexExpiredError ? {expires: error.expires, ...(error.nodeDocument ? {nodeDocument: error.nodeDocument} : {})} : {})}
  } finally {
    io.progress?.done()
  }

  for (const warning of fetched(result).warnings ?? []) io.warn?.(`--fetch: ${warning}`)
  io.fetched?.(fetched(result))
  return result
}

function toRunFetch(result: FetchResult): RunFetch {
  const index = result.nodeDocument ? {repository: result.repository ?? null, nodeDocument: result.nodeDocument} : result.indexVersion === undefined ? {} : {repository: result.repository ?? null, indexVersion: result.indexVersion, indexExpires: result.indexExpires ?? null}
  return {source: result.source, ...index, releases: result.releases.map(({release, status, bytes}) => ({release, status, bytes}))}
}
