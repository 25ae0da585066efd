import {stat} from 'node:fs/promises'
import {fileURLToPath} from 'node:url'

import {REPOSITORY_ID_TEXT, isRepositoryId, resolveSetting, settingList, settingString} from '../config/settings.js'
import {LocalpuppetError, NotFoundError, UsageError} from '../errors.js'
import {ExitCode} from '../exit-codes.js'
import type {ReleaseRef} from '../release/release-ref.js'
import type {ExpectedRepository} from './accepted-versions.js'
import {type FetchOptions, type FetchResult, type IndexRead, type ReleaseSource, looksLikeHost, sourceKind} from './release-source.js'

/**
 * The one place a source is turned into something that fetches: every kind of source
 * (a new kind, e.g. `apt`, is one more case here) goes through this function.
 */
export async function openSource(spec: string, options: Pick<FetchOptions, 'timeoutSeconds' | 'env'>): Promise<ReleaseSource> {
  const {RepositorySource} = await import('./repository-source.js')
  switch (sourceKind(spec)) {
    case 'https':
    case 'http': {
      const {HttpTransport} = await import('./readers/http-reader.js')
      return new RepositorySource(new HttpTransport(spec, {timeoutMs: options.timeoutSeconds ? options.timeoutSeconds * 1000 : undefined, env: options.env}))
    }

    case 'file': {
      const {DirTransport} = await import('./readers/dir-reader.js')
      let path: string
      try {
        path = fileURLToPath(spec)
      } catch (error) {
        throw new UsageError(`source ${spec}: ${(error as Error).message}`)
      }

      return new RepositorySource(new DirTransport(path))
    }

    case 'dir': {
      const {DirTransport} = await import('./readers/dir-reader.js')
      // `releases.example.com/puppet` is a URL without its scheme far more often than a relative directory.
      if (looksLikeHost(spec) && !(await stat(spec).then(() => true, () => false))) {
        throw new NotFoundError(`source ${spec}: no such directory, and it reads as a host: did you mean https://${spec} (or http://${spec})?`)
      }

      return new RepositorySource(new DirTransport(spec))
    }

    case 'apt': {
      const {AptSource} = await import('./apt-source.js')
      return new AptSource({env: options.env})
    }
  }
}

/**
 * Fetches refs from a source (opened, used, closed): what `fetch` and `apply --fetch` call.
 * The module directory must be trusted first (77, or --allow-untrusted): its install
 * records decide what is already present.
 */
export async function fetchReleases(source: string, refs: string[], options: FetchOptions): Promise<FetchResult> {
  const {assertTrustedModuleDir} = await import('../install/install-record.js')
  const untrusted = assertTrustedModuleDir(options.moduleDir, options.allowUntrusted)
  const opened = await openSource(source, options)
  try {
    const result = await opened.fetch(refs, options)
    return {...result, untrusted: [...new Set([...untrusted, ...(result.untrusted ?? [])])]}
  } finally {
    await opened.close()
  }
}

/**
 * A repository's index as it is now, for a command that only reads it (fleet status
 * --source): verified as a node verifies it (trusted keys, plain http, freshness against
 * what this machine accepted), remembered nowhere. 64 for a source with no index (apt).
 */
export async function readSourceIndex(spec: string, options: FetchOptions): Promise<IndexRead> {
  const opened = await openSource(spec, options)
  try {
    if (!opened.currentIndex) throw new UsageError(`source ${spec} has no index of channels; give a release repository (https://, http://, file:// or a directory)`)
    return await opened.currentIndex(options)
  } finally {
    await opened.close()
  }
}

/** A command's fetch: the source and keys when given, else the node's settings. */
export interface ConfiguredFetch {
  moduleDir: string
  /** --source; else the `source` setting (env, then the config file). */
  source?: string
  /** --trust; else the `trust` setting. */
  trust?: string[]
  insecure: boolean
  allowUntrusted?: boolean
  /** --accept-repository (fetch only): see FetchOptions. */
  acceptRepository?: string
  /** --repository-id (fetch only); else the `repository_id` setting. */
  repositoryId?: string
}

/**
 * Fetches refs from the configured source (flag, env, config file): the one path from a
 * command (fetch, apply --fetch, plan --fetch) to a source. 64 when no source is set.
 */
export async function fetchConfigured(refs: string[], fetch: ConfiguredFetch, options: Pick<FetchOptions, 'timeoutSeconds' | 'onProgress'> = {}): Promise<FetchResult> {
  const source = await configuredSource(fetch)
  const expectedRepository = await configuredRepositoryId(fetch)
  const trust = await settingList('trust', fetch.trust)
  return fetchReleases(source, refs, {
    moduleDir: fetch.moduleDir,
    trust,
    insecure: fetch.insecure,
    timeoutSeconds: options.timeoutSeconds,
    allowUntrusted: fetch.allowUntrusted,
    acceptRepository: fetch.acceptRepository,
    expectedRepository,
    onProgress: options.onProgress,
  })
}

/**
 * The id the source's index must have: --repository-id, else the `repository_id` setting
 * (env, then the config file), with where it was said; undefined when unset. 64 for a flag
 * that is no id, or --accept-repository naming another id than the setting.
 */
export async function configuredRepositoryId(fetch: Pick<ConfiguredFetch, 'acceptRepository' | 'repositoryId'>): Promise<ExpectedRepository | undefined> {
  for (const [flag, value] of [['--accept-repository', fetch.acceptRepository], ['--repository-id', fetch.repositoryId]] as const) {
    if (value !== undefined && !isRepositoryId(value)) throw new UsageError(`${flag} ${value}: not ${REPOSITORY_ID_TEXT}`)
  }

  const setting = await resolveSetting('repository_id', fetch.repositoryId)
  if (setting.value === null) return undefined
  const expected = {id: String(setting.value), from: setting.origin === 'file' ? `repository_id in ${setting.from}` : setting.from}
  if (fetch.acceptRepository !== undefined && fetch.acceptRepository !== expected.id) {
    throw new UsageError(`--accept-repository ${fetch.acceptRepository}: ${expected.from} says the repository is ${expected.id}`, [
      'with repository_id set, a re-created repository is followed by setting it to the new id (checked on the publisher\'s side), no --accept-repository needed',
    ])
  }

  return expected
}

/** The source a command fetches from: --source, else the `source` setting (env, then the config file); 64 when none. */
export async function configuredSource(fetch: Pick<ConfiguredFetch, 'source'>): Promise<string> {
  const source = await settingString('source', fetch.source)
  if (source === null) {
    throw new UsageError('no release source: give --source URL|DIR, or set source in /etc/localpuppet/config.yaml (env LOCALPUPPET_SOURCE)')
  }

  return source
}

/**
 * Whether a fetch failed because the source could not be reached (69: connection, timeout,
 * HTTP 5xx after retries, a missing repository or archive, apt unable to download): what
 * apply --fetch may fall back from to the releases already installed. Never a bad
 * signature or tampered index (65), a tag not in the repository (66), a conflict (73) or
 * a trust problem (77): those stay refusals.
 */
export function isUnreachable(error: unknown): error is LocalpuppetError {
  return error instanceof LocalpuppetError && error.exitCode === ExitCode.unavailable
}

/**
 * The reference a run resolves after a fetch: the tag fetched for it (a range means the
 * newest matching tag in the repository, not the newest on the node), keeping the text
 * as written for the record.
 */
export function pinToRelease(ref: ReleaseRef, release: string | undefined): ReleaseRef {
  if (release === undefined || ref.kind === 'trunk' || ref.kind === 'branch' || !release.startsWith(`${ref.app}/tags/`)) return ref
  return {kind: 'tag', app: ref.app, tag: release.slice(`${ref.app}/tags/`.length), text: ref.text}
}
