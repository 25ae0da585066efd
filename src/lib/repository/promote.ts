import {resolve} from 'node:path'

import {keyId, loadSigningKey} from '../archive/signature.js'
import {type JudgedPolicy, admitPromotion} from './channel-records.js'
import {NotFoundError, UsageError} from '../errors.js'
import {parseReleaseRef, usageChannelName} from '../release/release-ref.js'
import {type IndexUpdate, hasIndex, updateIndex} from './index-update.js'
import {own} from '../util/own.js'

export interface PromoteOptions {
  repo: string
  /** The tag the channel will name: `foo/tags/1.1.0`. */
  release: string
  channel: string
  signingKey?: string
  lockWaitMs?: number
  expiresInMs?: number
  now?: () => number
  /** The channel's policy as judged first (checkChannelPolicy): moved only if it is still that policy; an override is recorded in the channel's history. */
  policy?: JudgedPolicy
}

export interface PromoteResult extends IndexUpdate {
  repo: string
  app: string
  channel: string
  tag: string
  release: string
  /** The tag the channel named before (null: a new channel). */
  previous: string | null
  /** Whether the channel moved (false: it already named the tag; the index is still re-signed). */
  moved: boolean
}

/** The tag and channel of a promotion, checked before anything is read (64). */
export function parsePromotion(release: string, channel: string): {app: string; tag: string} {
  const ref = parseReleaseRef(release, 'promote')
  if (ref.kind !== 'tag') throw new UsageError(`promote ${release}: a channel names an exact tag (APP/tags/TAG), not a ${ref.kind}`)
  usageChannelName(channel, '--channel')
  return {app: ref.app, tag: ref.tag}
}

/**
 * Points a channel of an app at one of its published tags: the index is rewritten under the
 * repository's lock, as publish rewrites it (next version, new expiry, signed last), so a
 * node sees the channel move all at once or not at all. 66 when the tag is not published.
 */
export async function promoteChannel(options: PromoteOptions): Promise<PromoteResult> {
  const repo = resolve(options.repo)
  const {app, tag} = parsePromotion(options.release, options.channel)
  if (!(await hasIndex(repo))) throw new NotFoundError(`no release repository at ${repo}: no index.json`, ['publish the release first: localpuppet publish ARCHIVE --repo DIR'])
  const key = options.signingKey ? await loadSigningKey(options.signingKey) : null
  const now = options.now ?? Date.now
  const updated = await updateIndex({repo, key, lockWaitMs: options.lockWaitMs, expiresInMs: options.expiresInMs, now}, async (index) => {
    const entry = own(index.apps, app)
    if (entry === undefined || own(entry.tags, tag) === undefined) {
      const known = Object.keys(entry?.tags ?? {})
      throw new NotFoundError(`${app}/tags/${tag} is not published in ${repo}${known.length > 0 ? `; it has ${known.slice(-5).join(', ')}` : `; it has no tags of ${app}`}`, [
        `publish it first: localpuppet publish ${app}-${tag}.tar.gz --repo ${repo}`,
      ])
    }

    const previous = own(entry.channels, options.channel) ?? null
    // A yanked tag, a policy not judged, a history that does not read: refused; the move recorded in the channel's history.
    admitPromotion(index, `${repo}/index.json`, {app, tag, channel: options.channel, previous, by: key ? keyId(key) : null, at: new Date(now()).toISOString(), policy: options.policy})
    entry.channels = {...entry.channels, [options.channel]: tag}
    return {previous, moved: previous !== tag}
  })
  return {repo, app, channel: options.channel, tag, release: `${app}/tags/${tag}`, ...updated}
}
