import {settingList, settingString} from '../config/settings.js'
import {LocalpuppetError, UsageError} from '../errors.js'
import {parseReleaseRef} from '../release/release-ref.js'
import {type RepositoryIndex, tagInIndex} from '../repository/repository-index.js'
import {own} from '../util/own.js'

/** The signed index the wanted releases were resolved through. */
export interface WantedIndex {
  /** The repository, as given (--source) or configured. */
  source: string
  index: RepositoryIndex
  version: number | null
  signedBy: string | null
  /** For a person: an index without a version, trust problems --allow-untrusted let through. */
  warnings: string[]
}

export interface WantedIndexOptions {
  /** --source; else the `source` setting; neither (or a configured apt source): null, no index. */
  source?: string
  /** --trust; else the `trust` setting. */
  trust?: string[]
  insecure?: boolean
  allowUntrusted?: boolean
  timeoutSeconds?: number
}

/**
 * The repository's signed index now, for fleet status: from --source, else the configured
 * source (a node's own configuration), else null (wanted stays as each node last resolved
 * it). Verified and judged fresh as a node would (65 for a bad signature, a replayed or
 * expired index, an index of another repository than the repository_id setting names;
 * 69 unreachable), against what this machine's module directory accepted, and remembered
 * nowhere.
 */
export async function readWantedIndex(options: WantedIndexOptions): Promise<WantedIndex | null> {
  const source = await settingString('source', options.source)
  if (source === null) return null
  // A node configured with apt has no channels to read; only an explicit --source apt is a mistake.
  if (source === 'apt' && options.source === undefined) return null
  if (source === 'apt') throw new UsageError('--source apt: apt has no index of channels; give the release repository (https://, http://, file:// or a directory)')
  const {readSourceIndex, configuredRepositoryId} = await import('./fetch.js')
  const [trust, moduleDir, expectedRepository] = await Promise.all([settingList('trust', options.trust), settingString('module_dir'), configuredRepositoryId({})])
  const read = await readSourceIndex(source, {moduleDir: moduleDir!, trust, insecure: options.insecure, allowUntrusted: options.allowUntrusted, timeoutSeconds: options.timeoutSeconds, expectedRepository})
  return {
    source,
    index: read.index,
    version: read.accepted.version,
    signedBy: read.signedBy,
    warnings: [...(read.accepted.warning ? [read.accepted.warning] : []), ...read.untrusted.map((problem) => `--allow-untrusted: ${problem}`)],
  }
}

/**
 * The release a node's input's app names now, in the index: a channel's tag, a tag, a
 * range's newest match (as apply --fetch resolves it). Null with no reason for trunk and
 * branches (no repository holds them: the node's own resolution stands); null with a
 * reason for what the index cannot resolve (the node's next apply --fetch fails on it too).
 */
export function resolveInIndex(ref: string, index: RepositoryIndex): {release: string | null; why: string | null} {
  let parsed
  try {
    parsed = parseReleaseRef(ref)
  } catch (error) {
    if (error instanceof LocalpuppetError) return {release: null, why: error.message}
    throw error
  }

  if (parsed.kind === 'trunk' || parsed.kind === 'branch') return {release: null, why: null}
  if (own(index.apps, parsed.app) === undefined) return {release: null, why: `${parsed.text}: the repository has no app ${parsed.app}`}
  const tag = tagInIndex(index, parsed)
  if (tag === undefined) return {release: null, why: `${parsed.text}: not in the repository's index${parsed.kind === 'channel' ? ` (no channel ${parsed.channel} of ${parsed.app})` : ''}`}
  return {release: `${parsed.app}/tags/${tag}`, why: null}
}
