import {LocalpuppetError, UsageError} from '../errors.js'
import {type ReleaseRef, parseReleaseRef} from '../release/release-ref.js'

/** A release reference given as a command's argument: its syntax is a usage error (64), as any argument's is. */
export function usageReleaseRef(text: string, where: string): ReleaseRef {
  try {
    return parseReleaseRef(text, where)
  } catch (error) {
    if (error instanceof LocalpuppetError) throw new UsageError(error.message, error.suggestions)
    throw error
  }
}

/** A channel named on the command line, `foo/channels/stable`: its app and name (64 for anything else). */
export function parseChannelRef(text: string): {app: string; channel: string} {
  const ref = usageReleaseRef(text, 'channel')
  if (ref.kind !== 'channel') throw new UsageError(`${ref.text}: name a channel, APP/channels/NAME (foo/channels/stable), not a ${ref.kind}`)
  return {app: ref.app, channel: ref.channel}
}
