import {UsageError} from '../errors.js'
import {redactUrl} from '../util/terminal-text.js'

export interface FetchOptions {
  moduleDir: string
  /** Trusted keys: files or directories (--trust, the trust setting). */
  trust?: string[]
  /** The default trust directory, added when it exists; null for none (tests). */
  trustDir?: string | null
  /** Allow plain http:// with no trusted key. */
  insecure?: boolean
  timeoutSeconds?: number
  /** Progress of each download: bytes so far of total. */
  onProgress?: (progress: {release: string; bytes: number; total: number}) => void
  env?: NodeJS.ProcessEnv
  /** --allow-untrusted: install into a module directory others can write (see Staging.open). */
  allowUntrusted?: boolean
  /** --accept-repository: the identity of a repository re-created on purpose, accepted in place of the one pinned for the source. */
  acceptRepository?: string
  /** The repository_id setting: the id the source's index must have, from the first fetch on. */
  expectedRepository?: import('./accepted-versions.js').ExpectedRepository
}

export interface FetchedRelease {
  /** The tag fetched: `foo/tags/1.5.0`. */
  release: string
  /** The reference it was asked for (`foo@^1.5`). */
  ref: string
  status: 'installed' | 'already present'
  /** Bytes downloaded (0 when already present). */
  bytes: number
  /** Every release it brought, app first. */
  modulepath: string[]
  /**
   * How it came (repository sources, when installed): `archive`, or `objects` (only what the
   * installed tags lacked: delta/), with how many of the files installed were shared with
   * installed tags (hard links) or written (shared + written: the files installed), and how
   * many distinct contents were downloaded for those written (at most written).
   */
  delivery?: 'archive' | 'objects'
  files?: {shared: number; written: number; downloaded: number}
}

export interface FetchResult {
  source: string
  releases: FetchedRelease[]
  /** The trusted key that signed the index, or null when no key is trusted. */
  signedBy: string | null
  /** The repository's identity (null: an index made before identities); absent for apt. */
  repository?: string | null
  /** The repository index's version and expiry (null: an index made before versions); absent for apt. */
  indexVersion?: number | null
  indexExpires?: string | null
  /** Over http(s): whether the index was the copy this node kept (its server answered 304 to a conditional request). */
  indexUnchanged?: boolean
  /** Read through the node's own document (nodes/<h>.json, node-documents/) instead of index.json: its version (milliseconds since 1970) and expiry; indexVersion and indexExpires are then absent. */
  nodeDocument?: {version: number | null; expires: string | null}
  /** Over http(s): bytes of the bodies read from the repository, as they came over the wire (compressed, when they were). */
  bytesRead?: number
  /** input_from: repository: the node's input the index listed, and whether the input file changed. */
  nodeInput?: {node: string; sha256: string; status: 'updated' | 'unchanged' | 'not kept'}
  /** For a person, on standard error (an index without a version). */
  warnings?: string[]
  /** The trust problems --allow-untrusted let through (module dir, `.localpuppet`, `<app>/tags`). */
  untrusted?: string[]
}

/** A node's input as the repository's signed index lists it, verified. */
export interface NodeInputFetch {
  node: string
  /** The input as UTF-8 text (anything else is refused). */
  text: string
  /** The bytes the index signs: what the node keeps, byte for byte. */
  bytes: Buffer
  sha256: string
  /** Where it was read (a URL or path), for messages. */
  location: string
  published: import('../repository/repository-index.js').PublishedInput
  source: string
  signedBy: string | null
  indexVersion: number | null
  indexExpires: string | null
}

/** A repository's index as read: signature verified (signedBy, null when no key is trusted), judged fresh against what this machine accepted. */
export interface IndexRead {
  index: import('../repository/repository-index.js').RepositoryIndex
  signedBy: string | null
  accepted: import('./accepted-versions.js').IndexFreshness
  /** The trust problems --allow-untrusted let through. */
  untrusted: string[]
}

/** Where releases come from: something that can install tags into a module directory. */
export interface ReleaseSource {
  /** What the run record and --json name as the source. */
  readonly label: string
  fetch(refs: string[], options: FetchOptions): Promise<FetchResult>
  /** A node's own input (repositories only; apt has none). */
  nodeInput?(node: string, options: FetchOptions, have?: Buffer | null): Promise<NodeInputFetch>
  /** A layer the node's input names, verified against the index (repositories only). */
  nodeLayer?(name: string, options: FetchOptions): Promise<{text: string; bytes: Buffer; sha256: string; location: string} | null>
  /** The index as it is now, remembered nowhere (repositories only): what an operator's command reads. */
  currentIndex?(options: FetchOptions): Promise<IndexRead>
  close(): Promise<void>
}

export type SourceKind = 'https' | 'http' | 'file' | 'dir' | 'apt'

/** The kind of a source as written (`--source`, the `source` setting). */
export function sourceKind(spec: string): SourceKind {
  if (spec === 'apt') return 'apt'
  if (/^https:\/\//i.test(spec)) return 'https'
  if (/^http:\/\//i.test(spec)) return 'http'
  if (/^file:\/\//i.test(spec)) return 'file'
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(spec)) throw new UsageError(`source ${redactUrl(spec)}: unsupported scheme; use https://, http://, file://, a directory or apt`)
  return 'dir'
}

/**
 * Whether a directory source reads as a host without its scheme: `releases.example.com/puppet`,
 * `localhost:8080/repo`, `10.0.0.5/repo` (a relative path whose first name is a host name,
 * `localhost` or an IPv4 address, with or without a port).
 */
export function looksLikeHost(spec: string): boolean {
  return /^(?:localhost|\d{1,3}(?:\.\d{1,3}){3}|(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+[a-z]{2,})(?::\d{1,5})?(?:\/|$)/i.test(spec)
}
