import {formatAge} from '../util/duration.js'

/**
 * How long before an index expires publish, promote, fetch and `status --check` warn, as the
 * shipped alert LocalpuppetIndexExpiresSoon does: a week, time for a person to find the
 * re-signing timer broken before every node stops taking releases.
 */
export const INDEX_EXPIRY_WARNING_MS = 7 * 86_400_000

/**
 * A warning when an index expiring at `expires` lapses within INDEX_EXPIRY_WARNING_MS of
 * `now` (`what` names it: "index version 3 of https://..."), else null; an expired one is
 * said to be so.
 */
export function expiryWarning(what: string, expires: string | null | undefined, now: number): string | null {
  if (!expires) return null
  const left = Date.parse(expires) - now
  if (!(left < INDEX_EXPIRY_WARNING_MS)) return null
  const resign = 're-sign it (localpuppet publish --repo DIR --sign KEY.pem, with no archive) and check the timer that should have'
  if (left <= 0) return `${what} expired at ${expires}: nodes take nothing new from it (they enforce what they have installed); ${resign}`
  return `${what} expires at ${expires}, in ${formatAge(left)}: then nodes take nothing new from it; ${resign}`
}
