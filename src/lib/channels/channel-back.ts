import {resolve} from 'node:path'

import {NotFoundError} from '../errors.js'
import {MAX_CHANNEL_HISTORY, describeYank, previousTag, recordMove} from '../repository/channel-records.js'
import type {IndexUpdate} from '../repository/index-update.js'
import {own} from '../util/own.js'
import {parseChannelRef} from './channel-ref.js'
import {type RecordsUpdateOptions, updateRecords} from './records-update.js'

export interface ChannelBackOptions extends RecordsUpdateOptions {
  /** `foo/channels/stable` */
  channel: string
}

export interface ChannelBackResult extends IndexUpdate {
  repo: string
  channel: string
  /** The tag the channel named, and the one it names now. */
  from: string
  to: string
}

/**
 * Takes a channel back to the tag it named before its current one (previousTag: the history
 * in the signed index says which), recorded in its history as a `back`. Not gated by the
 * channel's policy: the tag it returns to is one the channel named, and a rollback is what
 * an operator does when the newest tag hurts. 66 when the channel does not exist or its
 * history (the newest MAX_CHANNEL_HISTORY moves) holds no earlier tag, or that tag is yanked.
 */
export async function channelBack(options: ChannelBackOptions): Promise<ChannelBackResult> {
  const repo = resolve(options.repo)
  const {app, channel} = parseChannelRef(options.channel)
  const where = `${app}/channels/${channel}`
  const updated = await updateRecords({...options, repo}, ({index, records, by, at}) => {
    const entry = own(index.apps, app)
    const from = own(entry?.channels, channel)
    if (entry === undefined || from === undefined) throw new NotFoundError(`${where}: no such channel in ${repo}`)
    const to = previousTag(own(records.history[app], channel) ?? [], from)
    if (to === null) {
      throw new NotFoundError(`${where}: its history holds no tag before ${from} (the index keeps the last ${MAX_CHANNEL_HISTORY} moves of a channel, from this version of localpuppet on)`, [
        `promote the tag you want: localpuppet promote ${app}/tags/TAG --channel ${channel} --repo ${options.repo}`,
      ])
    }

    const yank = own(entry.tags, to)?.yanked
    if (yank) throw new NotFoundError(`${where} not moved back: ${describeYank(app, to, yank)}`, [`promote another tag: localpuppet promote ${app}/tags/TAG --channel ${channel} --repo ${options.repo}`])
    if (own(entry.tags, to) === undefined) throw new NotFoundError(`${where} not moved back: ${app}/tags/${to}, which it named before, is no longer in the index`)
    entry.channels = {...entry.channels, [channel]: to}
    recordMove(index, app, channel, {at, action: 'back', from, to, by})
    return {from, to}
  })
  return {repo, channel: where, ...updated}
}
