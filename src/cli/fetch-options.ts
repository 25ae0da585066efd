import {settingList, settingString} from '../lib/config/settings.js'
import {UsageError} from '../lib/errors.js'
import type {FetchResult} from '../lib/source/release-source.js'
import type {ReleaseRef} from '../lib/release/release-ref.js'
import type {RunFetch} from '../lib/run/run-plan.js'

/** The flags fetch, apply --fetch and plan --fetch share. */
export interface FetchFlagValues {
  'module-dir': string
  source?: string
  trust?: string[]
  insecure: boolean
  'allow-untrusted'?: boolean
}

/**
 * Fetches refs from the configured source (flag, env, config file): the one path from a
 * command to the repository library. Progress goes to a terminal only.
 */
export async function fetchFromSource(refs: string[], flags: FetchFlagValues, options: {timeoutSeconds?: number; progress: boolean}): Promise<FetchResult> {
  const source = await settingString('source', flags.source)
  if (source === null) {
    throw new UsageError('no release source: give --source URL|DIR, or set source in /etc/localpuppet/config.yaml (env LOCALPUPPET_SOURCE)')
  }

  const trust = await settingList('trust', flags.trust)
  const [{fetchReleases}, {progressPrinter}] = await Promise.all([import('../lib/source/fetch.js'), import('./render/progress.js')])
  const printer = options.progress && process.stderr.isTTY ? progressPrinter(process.stderr) : null
  try {
    return await fetchReleases(source, refs, {
      moduleDir: flags['module-dir'],
      trust,
      insecure: flags.insecure,
      timeoutSeconds: options.timeoutSeconds,
      allowUntrusted: flags['allow-untrusted'],
      onProgress: printer ? (p) => printer.update(p) : undefined,
    })
  } finally {
    printer?.done()
  }
}

/** `fetched foo/tags/1.5.0 (3.1 MiB)` lines for a person. */
export async function describeFetch(result: FetchResult): Promise<string[]> {
  const {formatBytes} = await import('./render/progress.js')
  return result.releases.map((r) =>
    r.status === 'installed'
      ? `fetched ${r.release} from ${result.source} (${formatBytes(r.bytes)}${r.modulepath.length > 1 ? `, with ${r.modulepath.slice(1).join(', ')}` : ''})`
      : `${r.release}: already present`,
  )
}

/**
 * apply --fetch / plan --fetch: fetches the input's release, then pins a range to the tag
 * fetched, so the run applies the repository's newest match, not the node's.
 */
export async function fetchForRun<T extends {app: ReleaseRef}>(input: T, flags: FetchFlagValues, json: boolean): Promise<{input: T; fetched: RunFetch; release: string; untrusted: string[]}> {
  const result = await fetchFromSource([input.app.text], flags, {progress: !json})
  if (!json) for (const line of await describeFetch(result)) process.stderr.write(`localpuppet: ${line}\n`)
  const release = result.releases[0].release
  // What --allow-untrusted let through while fetching (an unsigned repository others can write): the plan records it.
  return {input: await pinInput(input, release), fetched: toRunFetch(result), release, untrusted: result.untrusted ?? []}
}

/** The input with its app pinned to a fetched release (the detached half of --detach --fetch). */
export async function pinInput<T extends {app: ReleaseRef}>(input: T, release: string | undefined): Promise<T> {
  const {pinToRelease} = await import('../lib/source/fetch.js')
  return {...input, app: pinToRelease(input.app, release)}
}

function toRunFetch(result: FetchResult): RunFetch {
  return {source: result.source, releases: result.releases.map(({release, status, bytes}) => ({release, status, bytes}))}
}
