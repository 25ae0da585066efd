import semver from 'semver'

import {ReleaseError, UsageError} from '../errors.js'
import {terminalText} from '../util/terminal-text.js'

/** An app name or a tag/branch name: one safe path segment, never `.` or `..`. */
const APP_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/
const VERSION_NAME = /^[A-Za-z0-9][A-Za-z0-9_.+-]{0,127}$/
/** Tags that count as versions: `1.2.3` or `v1.2.3`, with optional prerelease and build. */
const SEMVER_TAG = /^v?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?$/

export type ReleaseRef =
  | {kind: 'trunk'; app: string; text: string}
  | {kind: 'branch'; app: string; branch: string; text: string}
  | {kind: 'tag'; app: string; tag: string; text: string}
  | {kind: 'range'; app: string; range: string; text: string}
  | {kind: 'channel'; app: string; channel: string; text: string}

/** A release channel's name (`canary`, `stable`): lowercase, as it is also a Prometheus label value and a path segment. */
const CHANNEL_NAME = /^[a-z][a-z0-9_-]{0,63}$/

/** True when a name can be a channel's (`stable`, `canary`, `eu-west_1`). */
export function isValidChannelName(name: string): boolean {
  return CHANNEL_NAME.test(name)
}

/** A channel name given on the command line (`--channel`, `--require-healthy`): itself, or 64 naming the flag. */
export function usageChannelName(name: string, flag: string): string {
  if (!isValidChannelName(name)) throw new UsageError(`${flag} ${terminalText(JSON.stringify(name))}: not a channel name (lowercase letters, digits, '-' and '_', starting with a letter)`)
  return name
}

/**
 * Parses a release reference as written in `app:` or a manifest's `modulepath:`:
 * `foo/trunk`, `foo/branches/NAME`, `foo/tags/TAG`, `foo@RANGE` (semver range or exact
 * tag), `foo/channels/NAME` (the tag a repository's channel names), optionally prefixed by
 * `app/` as in the original design's example.
 * Throws a ReleaseError (65) naming the reference when it is not one of these.
 */
export function parseReleaseRef(text: unknown, where = 'release reference'): ReleaseRef {
  if (typeof text !== 'string') {
    throw new ReleaseError(`${where}: expected a string such as foo/trunk, foo/tags/1.2.0 or foo@^1.2, got ${describe(text)}`)
  }

  const ref = text.trim()
  const fail = (why: string): never => {
    throw new ReleaseError(`${where}: ${JSON.stringify(text)} ${why}`, [
      'use APP/trunk, APP/branches/NAME, APP/tags/TAG, APP@RANGE (e.g. foo@^1.2) or APP/channels/NAME',
    ])
  }

  if (ref === '') fail('is empty')
  if (ref.length > 300) fail('is too long')
  if (/[\0-\u001F\u007F]/.test(ref)) fail('contains control characters')

  const at = ref.indexOf('@')
  if (at !== -1) {
    const app = ref.slice(0, at)
    const range = ref.slice(at + 1).trim()
    if (!APP_NAME.test(app)) fail(`has an invalid app name ${JSON.stringify(app)}`)
    if (range === '') fail('has nothing after @')
    if (!VERSION_NAME.test(range) && semver.validRange(range) === null) {
      fail('is neither an exact tag name nor a valid semver range after @')
    }

    return {kind: 'range', app, range, text: ref}
  }

  let parts = ref.split('/')
  // `app/foo/trunk` is the original design's spelling of `foo/trunk`. A reference already
  // complete as written keeps its plain meaning: `app/tags/trunk` is tag `trunk` of app `app`.
  if (parts[0] === 'app' && !isCompleteShape(parts) && isCompleteShape(parts.slice(1))) {
    parts = parts.slice(1)
  }

  const [app, kind, name, ...rest] = parts
  if (!APP_NAME.test(app)) fail(`has an invalid app name ${JSON.stringify(app)}`)
  if (kind === 'trunk' && name === undefined) return {kind: 'trunk', app, text: ref}
  if ((kind === 'tags' || kind === 'branches') && name !== undefined && rest.length === 0) {
    if (!VERSION_NAME.test(name)) fail(`has an invalid ${kind === 'tags' ? 'tag' : 'branch'} name ${JSON.stringify(name)}`)
    return kind === 'tags' ? {kind: 'tag', app, tag: name, text: ref} : {kind: 'branch', app, branch: name, text: ref}
  }

  if (kind === 'channels' && name !== undefined && rest.length === 0) {
    if (!CHANNEL_NAME.test(name)) fail(`has an invalid channel name ${JSON.stringify(name)} (lowercase letters, digits, '-' and '_', starting with a letter)`)
    return {kind: 'channel', app, channel: name, text: ref}
  }

  return fail('is not a release reference')
}

/** The directory of a release relative to the module directory, e.g. `foo/tags/1.2.0`. */
export function releasePath(ref: {app: string; kind: 'trunk' | 'branch' | 'tag'; tag?: string; branch?: string}): string {
  if (ref.kind === 'trunk') return `${ref.app}/trunk`
  if (ref.kind === 'branch') return `${ref.app}/branches/${ref.branch}`
  return `${ref.app}/tags/${ref.tag}`
}

/** True when a tag name reads as a semantic version (`1.2.3`, `v1.2.3-rc.1`). */
export function isSemverTag(tag: string): boolean {
  // The pattern alone lets through names semver refuses (`1.0.0-01`, `1.0.0-rc..1`, a major
  // past 2^53), and semver.compareBuild throws on those.
  return SEMVER_TAG.test(tag) && semver.valid(tag) !== null
}

/** True when a tag or branch name is a safe single path segment. */
export function isValidVersionName(name: string): boolean {
  return VERSION_NAME.test(name)
}

/**
 * Sorts tag names newest first by semver precedence (build metadata breaks ties, then the
 * name itself, so the order is total and stable); tags that are not versions come last,
 * by name.
 */
export function sortTagsNewestFirst(tags: string[]): string[] {
  const versions = tags.filter((tag) => isSemverTag(tag))
  const others = tags.filter((tag) => !isSemverTag(tag)).sort()
  versions.sort((a, b) => semver.compareBuild(b, a) || (a < b ? 1 : a > b ? -1 : 0))
  return [...versions, ...others]
}

/**
 * The highest tag satisfying a semver range, or undefined. Prereleases match only when the
 * range itself names a prerelease of the same version (semver's default).
 */
export function maxSatisfyingTag(tags: string[], range: string): string | undefined {
  return sortTagsNewestFirst(tags.filter((tag) => isSemverTag(tag))).find((tag) => semver.satisfies(tag, range))
}

/** APP/trunk, APP/tags/NAME or APP/branches/NAME, judged by shape alone. */
function isCompleteShape(parts: string[]): boolean {
  return (parts.length === 2 && parts[1] === 'trunk') || (parts.length === 3 && (parts[1] === 'tags' || parts[1] === 'branches' || parts[1] === 'channels'))
}

function describe(value: unknown): string {
  if (value === null || value === undefined) return 'nothing'
  if (Array.isArray(value)) return 'a list'
  return typeof value === 'object' ? 'a mapping' : `${typeof value} ${JSON.stringify(value)}`
}
