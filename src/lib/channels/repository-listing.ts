import {readFile} from 'node:fs/promises'
import {join, resolve} from 'node:path'

import {NotFoundError, describeFsError} from '../errors.js'
import {hasIndex, readCurrentIndex} from '../repository/index-update.js'
import {REPOSITORY_INDEX, REPOSITORY_SIGNATURE, type RepositoryIndex} from '../repository/repository-index.js'
import {type WantedIndexOptions, readWantedIndex} from '../source/wanted-now.js'
import {sortTagsNewestFirst} from '../release/release-ref.js'
import {isMapping} from '../util/json.js'
import {own} from '../util/own.js'
import {redactUrl} from '../util/terminal-text.js'
import {type ChannelMove, type ChannelPolicy, MAX_CHANNEL_HISTORY, type YankRecord, readChannelRecords} from '../repository/channel-records.js'
import {parseChannelRef} from './channel-ref.js'

export interface ListedChannel {
  channel: string
  tag: string
  policy: ChannelPolicy | null
  /** How many moves its history keeps. */
  moves: number
}

export interface ListedApp {
  app: string
  /** Newest first. */
  tags: Array<{tag: string; publishedAt: string; signedBy: string | null; yanked: YankRecord | null}>
  channels: ListedChannel[]
  /** Policies of channels the app does not have (yet): shown, so a typo is seen. */
  orphanPolicies: Array<{channel: string; policy: ChannelPolicy}>
}

export interface RepositoryListing {
  repo: string
  /** The index's identity, version and expiry (null in an index made before them). */
  repository: string | null
  version: number | null
  expires: string | null
  expired: boolean
  /** The key id that signed the index, or null... */
  signedBy: string | null
  /**
   * ...verified with a trusted key (--source); named by index.json.sig, not verified here
   * (--repo: nodes verify it); unsigned (--repo, no index.json.sig); not checked (--source
   * with no trusted key).
   */
  signature: 'verified' | 'named' | 'unsigned' | 'not checked'
  apps: ListedApp[]
  /** Where the node inputs are listed: in index.json, or each in its node's own document (publish --node-documents-only). */
  nodeInputsIn: 'index' | 'documents'
  /** The node inputs; null when not listed: in documents, read with --source (a node's reading of its own document only; --repo reads them all). */
  nodes: Array<{node: string; app: string; publishedAt: string}> | null
}

/**
 * The repository as the publisher's copy holds it: every app's tags (yanked ones with when
 * and why), channels with their tag and policy, the node inputs, and the index's identity,
 * version, expiry and signing key. 66 when there is no repository there; 65 when the index or
 * a channel's records do not read.
 */
export async function listRepository(repoDir: string, now = Date.now()): Promise<RepositoryListing> {
  const repo = resolve(repoDir)
  if (!(await hasIndex(repo))) throw new NotFoundError(`no release repository at ${repo}: no ${REPOSITORY_INDEX}`, ['publish creates it: localpuppet publish ARCHIVE --repo DIR'])
  const {index, signed} = await readCurrentIndex(repo)
  // index.json lists no nodes (publish --node-documents-only): their documents do.
  if (index.nodesInDocuments && index.repository) index.nodes = (await import('../repository/node-documents/node-table.js')).readNodeTable(repo, index.repository)
  return listIndex(index, {repo, signedBy: signed ? await signatureKeyId(repo) : null, signature: signed ? 'named' : 'unsigned'}, now)
}

/**
 * `repository list --source`: the repository as a node reads it (readWantedIndex: the
 * signature verified with the trusted keys, judged fresh against what this machine accepted,
 * remembered nowhere), so the key shown is the one that verified. 65, 69 as a node's fetch.
 */
export async function listServedRepository(options: WantedIndexOptions & {source: string}, now = Date.now()): Promise<RepositoryListing & {warnings: string[]}> {
  const read = await readWantedIndex(options)
  if (read === null) throw new NotFoundError(`--source ${options.source}: no repository`)
  // The source's credentials stay out of the listing, --json included.
  return {...listIndex(read.index, {repo: redactUrl(read.source), signedBy: read.signedBy, signature: read.signedBy === null ? 'not checked' : 'verified'}, now), warnings: read.warnings}
}

/** A listing of an index already read: `where` names it, and says who signed it and whether that was verified here. */
export function listIndex(index: RepositoryIndex, where: Pick<RepositoryListing, 'repo' | 'signedBy' | 'signature'>, now = Date.now()): RepositoryListing {
  const records = readChannelRecords(index, `${where.repo}/${REPOSITORY_INDEX}`)
  const apps = Object.keys(index.apps)
    .sort()
    .map((app): ListedApp => {
      const entry = index.apps[app]
      const channels = Object.keys(entry.channels ?? {}).sort()
      return {
        app,
        tags: sortTagsNewestFirst(Object.keys(entry.tags)).map((tag) => ({tag, publishedAt: entry.tags[tag].publishedAt, signedBy: entry.tags[tag].signedBy, yanked: entry.tags[tag].yanked ?? null})),
        channels: channels.map((channel) => ({
          channel,
          tag: entry.channels![channel],
          policy: own(records.policies[app], channel) ?? null,
          moves: own(records.history[app], channel)?.length ?? 0,
        })),
        orphanPolicies: Object.entries(records.policies[app] ?? {})
          .filter(([channel]) => !channels.includes(channel))
          .map(([channel, policy]) => ({channel, policy})),
      }
    })
  const nodes =
    index.nodesInDocuments && index.nodes === undefined
      ? null
      : Object.keys(index.nodes ?? {})
          .sort()
          .map((node) => ({node, app: index.nodes![node].app, publishedAt: index.nodes![node].publishedAt}))
  const expires = index.expires ?? null
  return {
    repo: where.repo,
    repository: index.repository ?? null,
    version: index.version ?? null,
    expires,
    expired: expires !== null && Date.parse(expires) <= now,
    signedBy: where.signedBy,
    signature: where.signature,
    apps,
    nodeInputsIn: index.nodesInDocuments ? 'documents' : 'index',
    nodes,
  }
}

/** The key id index.json.sig names ('unreadable' when it names none). */
async function signatureKeyId(repo: string): Promise<string> {
  const path = join(repo, REPOSITORY_SIGNATURE)
  let doc: unknown
  try {
    doc = JSON.parse(await readFile(path, 'utf8'))
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== undefined) throw describeFsError(error, path)
    return 'unreadable'
  }

  return isMapping(doc) && typeof doc.keyId === 'string' && /^sha256:[0-9a-f]{64}$/.test(doc.keyId) ? doc.keyId : 'unreadable'
}

export interface ChannelHistory {
  repo: string
  channel: string
  /** The tag it names now (null: no such channel, though it may have a history or policy). */
  tag: string | null
  policy: ChannelPolicy | null
  /** The index keeps this many moves per channel. */
  kept: number
  /** Newest first. */
  moves: ChannelMove[]
}

/** A channel's moves as the signed index records them, newest first, with its policy. 66 when the app has neither the channel nor a record of it. */
export async function channelHistory(repoDir: string, channelRef: string): Promise<ChannelHistory> {
  const repo = resolve(repoDir)
  const {app, channel} = parseChannelRef(channelRef)
  if (!(await hasIndex(repo))) throw new NotFoundError(`no release repository at ${repo}: no ${REPOSITORY_INDEX}`)
  const {index} = await readCurrentIndex(repo)
  const records = readChannelRecords(index, join(repo, REPOSITORY_INDEX))
  const tag = own(own(index.apps, app)?.channels, channel) ?? null
  const moves = own(records.history[app], channel) ?? []
  const policy = own(records.policies[app], channel) ?? null
  if (tag === null && moves.length === 0 && policy === null) {
    const known = Object.keys(own(index.apps, app)?.channels ?? {})
    throw new NotFoundError(`${app}/channels/${channel}: no such channel in ${repo}${known.length > 0 ? `; ${app} has ${known.join(', ')}` : ''}`)
  }

  return {repo, channel: `${app}/channels/${channel}`, tag, policy, kept: MAX_CHANNEL_HISTORY, moves: [...moves].reverse()}
}
