import {UsageError} from '../errors.js'
import {parseReleaseRef} from '../release/release-ref.js'

/** A channel named on the command line, `foo/channels/stable`: its app and name (64 for anything else). */
export function parseChannelRef(text: string): {app: string; channel: string} {
  const ref = parseReleaseRef(text, 'channel')
  if (ref.kind !== 'channel') throw new UsageError(`${ref.text}: name a channel, APP/channels/NAME (foo/channels/stable), not a ${ref.kind}`)
  return {app: ref.app, channel: ref.channel}
}
