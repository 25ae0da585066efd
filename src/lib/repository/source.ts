import {fileURLToPath} from 'node:url'

import {UsageError} from '../errors.js'
import type {FetchOptions, FetchResult} from './fetch.js'

/** Where releases come from: something that can install tags into a module directory. */
export interface ReleaseSource {
  /** What the run record and --json name as the source. */
  readonly label: string
  fetch(refs: string[], options: FetchOptions): Promise<FetchResult>
  close(): Promise<void>
}

export type SourceKind = 'https' | 'http' | 'file' | 'dir' | 'apt'

/** The kind of a source as written (`--source`, the `source` setting). */
export function sourceKind(spec: string): SourceKind {
  if (spec === 'apt') return 'apt'
  if (/^https:\/\//i.test(spec)) return 'https'
  if (/^http:\/\//i.test(spec)) return 'http'
  if (/^file:\/\//i.test(spec)) return 'file'
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(spec)) throw new UsageError(`source ${spec}: unsupported scheme; use https://, http://, file://, a directory or apt`)
  return 'dir'
}

/**
 * The one place a source is turned into something that fetches: every kind of source
 * (a new kind, e.g. `apt`, is one more case here) goes through this function.
 */
export async function openSource(spec: string, options: Pick<FetchOptions, 'timeoutSeconds' | 'env'>): Promise<ReleaseSource> {
  const {RepositorySource} = await import('./fetch.js')
  switch (sourceKind(spec)) {
    case 'https':
    case 'http': {
      const {HttpTransport} = await import('./http-transport.js')
      return new RepositorySource(new HttpTransport(spec, {timeoutMs: options.timeoutSeconds ? options.timeoutSeconds * 1000 : undefined, env: options.env}))
    }

    case 'file': {
      const {DirTransport} = await import('./dir-transport.js')
      let path: string
      try {
        path = fileURLToPath(spec)
      } catch (error) {
        throw new UsageError(`source ${spec}: ${(error as Error).message}`)
      }

      return new RepositorySource(new DirTransport(path))
    }

    case 'dir': {
      const {DirTransport} = await import('./dir-transport.js')
      return new RepositorySource(new DirTransport(spec))
    }

    case 'apt': {
      const {AptSource} = await import('../apt/apt-source.js')
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
  const {assertTrustedModuleDir} = await import('../archive/install-record.js')
  const untrusted = assertTrustedModuleDir(options.moduleDir, options.allowUntrusted)
  const opened = await openSource(source, options)
  try {
    const result = await opened.fetch(refs, options)
    return {...result, untrusted: [...new Set([...untrusted, ...(result.untrusted ?? [])])]}
  } finally {
    await opened.close()
  }
}
