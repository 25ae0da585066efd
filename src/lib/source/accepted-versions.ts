import {constants} from 'node:fs'
import {mkdir, open, stat} from 'node:fs/promises'
import {join} from 'node:path'

import {DamagedRecordError, ReleaseError, describeFsError} from '../errors.js'
import {localpuppetDir, recordPath} from '../install/install-record.js'
import {isValidVersionName} from '../release/release-ref.js'
import {RunLock} from '../state/lock.js'
import {writeFileAtomic} from '../util/atomic-write.js'
import {isMapping} from '../util/json.js'
import {openedPathTrustProblem, refuseUnlessAllowed} from '../util/trusted-path.js'
import {expiryWarning} from '../repository/index-expiry.js'
import {REPOSITORY_ID, type RepositoryIndex} from '../repository/repository-index.js'

/** In the module directory's `.localpuppet/`: what the node accepted from each repository. */
export const ACCEPTED_VERSIONS_FILE = 'repositories.json'
const LOCK_FILE = 'repositories.lock'

/**
 * What a node accepted from one repository (whatever key signed it: a key rotation
 * continues the same versions, so an index signed by a retired key that is still
 * trusted cannot roll the node back either).
 */
export interface AcceptedIndex {
  /** The repository's identity, pinned by the first index accepted that had one; null: none seen yet (older publishers). */
  repository: string | null
  /** The highest index version accepted; null: only indexes without a version (older publishers) so far. */
  version: number | null
  expires: string | null
  acceptedAt: string
}

/** repositories.json: per repository (its normalised source). */
export interface AcceptedVersions {
  format: 2
  repositories: Record<string, AcceptedIndex>
  /**
   * The tag each channel (`foo/channels/stable`) named in the newest index accepted that
   * has it, once that tag is installed here (see installedChannels): how an input on a
   * channel resolves when the repository cannot be reached, or for plan and apply without
   * --fetch. Absent before channels.
   */
  channels?: Record<string, RememberedChannel>
}

export interface RememberedChannel {
  tag: string
  /** The repository and index version it came from. */
  source: string
  version: number | null
  at: string
}

/**
 * An index refused for having expired (65): nothing is taken from it. `apply --fetch` tells
 * it from other refusals: the node keeps enforcing the release it installed and verified
 * before (as when the source is unreachable), loudly, rather than stopping.
 */
export class IndexExpiredError extends ReleaseError {
  constructor(
    message: string,
    /** When the refused index expired (ISO 8601). */
    readonly expires: string,
    suggestions: string[] = [],
    /** A node's own document was refused, not the index: its version (what the run record names nodeDocument). */
    readonly nodeDocument?: {version: number | null},
  ) {
    super(message, suggestions)
  }
}

/** The outcome of an index judged fresh: the repository, version and expiry to report, and a warning for a person, if any. */
export interface IndexFreshness {
  repository: string | null
  version: number | null
  expires: string | null
  warning: string | null
}

/**
 * The name a repository is remembered by: a directory's absolute path (a `file://` URL
 * becomes one), a URL as the transport normalised it, without any user or password.
 */
export function repositoryKey(label: string): string {
  if (!/^https?:\/\//i.test(label)) return label
  const url = new URL(label)
  url.username = ''
  url.password = ''
  return url.href
}

export function acceptedVersionsPath(moduleDir: string): string {
  return join(localpuppetDir(moduleDir), ACCEPTED_VERSIONS_FILE)
}

/** What an index says about itself: its identity, version and expiry. */
export type IndexHeader = Pick<RepositoryIndex, 'repository' | 'version' | 'expires'>

/** The id a node expects of a repository (the `repository_id` setting), and where that was said, for messages (`repository_id in FILE:LINE`, `LOCALPUPPET_REPOSITORY_ID`, `--repository-id`). */
export interface ExpectedRepository {
  id: string
  from: string
}

/**
 * How an operator learns a repository's genuine id: from the publisher's side, never from
 * what a node just read (which is what a substitute would say).
 */
export const GENUINE_ID_HINT =
  "find the repository's genuine id on the publisher's side (the repository field of index.json in the repository's directory, or publish --json's repository) and compare it with the ids above; never take an id from what the node read"

/**
 * Judges an index against what the node accepted before from the same source, without I/O.
 * First its identity: with `expected` (the repository_id setting), an index of any other
 * id is refused (65), on first contact too; a repository re-created on purpose is followed
 * by changing the setting, which then replaces the pinned id as `acceptRepository` does.
 * Without it, an index of another repository than the one pinned for the source (another
 * repository signed with the same key, copied over this one), or one without an identity
 * once one is pinned, is refused (65, naming both), unless `acceptRepository` names the
 * index's own (a repository re-created on purpose). Hints send the operator to the
 * publisher's side for the genuine id, never to the one just read. Then its version: older
 * than one accepted is a replay (65, naming both versions); an expired one may be a replay
 * that froze the node (65, naming the date); an index without a version is accepted (with
 * a warning) only while nothing versioned came from the source. Equal versions are fine:
 * the same index fetched again.
 */
/**
 * What a replay track's messages call the signed file and its source: `index` of SOURCE, or,
 * for a node's document (`SOURCE#node:NAME`, node-documents/), NAME's `node document` of SOURCE.
 */
function describeTrack(source: string): {thing: string; of: string} {
  const match = /^(.*)#node:([^#]+)$/.exec(source)
  return match ? {thing: `node ${match[2]}'s document`, of: match[1]} : {thing: 'index', of: source}
}

export function judgeIndex(memory: AcceptedVersions, source: string, index: IndexHeader, now: number, acceptRepository?: string, expected?: ExpectedRepository): IndexFreshness {
  const before = memory.repositories[repositoryKey(source)]
  const {thing, of} = describeTrack(source)
  const id = index.repository ?? null
  const is = id === null ? 'has no repository id' : `is of repository ${id}`
  if (acceptRepository !== undefined && id !== acceptRepository) {
    throw new ReleaseError(`${thing} of ${of} ${is}, not ${acceptRepository} as --accept-repository says; refused`, [GENUINE_ID_HINT])
  }

  if (expected !== undefined && id !== expected.id) {
    throw new ReleaseError(`${thing} of ${of} ${is}, not ${expected.id} as ${expected.from} says; refused: another repository's index in its place (one signed with the same key), or the repository was re-created`, [
      GENUINE_ID_HINT,
      `if the genuine id is ${expected.id}, the source serves another repository (a mirror or proxy?); if it is another, the repository was re-created: set repository_id to the genuine id`,
    ])
  }

  // A repository re-created on purpose: what was accepted from the one before says nothing about it.
  const wanted = acceptRepository ?? expected?.id
  const known = wanted !== undefined && before?.repository !== wanted ? undefined : before
  const pinned = known?.repository ?? null
  if (pinned !== null && id !== pinned) {
    throw new ReleaseError(
      `${thing} of ${of} ${is}, not ${pinned}, which this node accepted from it: another repository's index in its place (one signed with the same key)? ` +
        (id === null
          ? 'Only a localpuppet older than repository ids publishes an index without one: publish with this one.'
          : `If ${source} was re-created on purpose, accept its new id once, as the publisher's side gives it: localpuppet fetch APP --source ${source} --accept-repository ID (or set repository_id to it)`),
      [GENUINE_ID_HINT, 'a mirror or proxy may be serving another repository: check it against the one this node is meant to follow'],
    )
  }

  if (index.version === undefined) {
    if (known?.version != null) {
      throw new ReleaseError(`${thing} of ${of} has no version (made by an older localpuppet), but version ${known.version} was already accepted from it: a replay (rollback attack)?`, [
        'a mirror or proxy may be serving an old copy; re-publish the repository (publish --repo DIR --sign KEY.pem) and check its mirrors',
      ])
    }

    const warning =
      known === undefined
        ? `${thing} of ${of} has no version or expiry (published by an older localpuppet): nothing stops an old copy from being replayed; re-publish it with this localpuppet (publish --repo DIR --sign KEY.pem)`
        : null
    return {repository: id, version: null, expires: null, warning}
  }

  if (known?.version != null && index.version < known.version) {
    throw new ReleaseError(`${thing} version ${index.version} of ${of} is older than version ${known.version} already accepted from it: a replay (rollback attack)?`, [
      'a mirror or proxy may be serving an old copy: check it against the repository',
      `a repository restored from a backup: re-sign it (publish --repo DIR --sign KEY.pem) until it passes ${known.version}`,
    ])
  }

  if (Date.parse(index.expires!) <= now) {
    throw new IndexExpiredError(`${thing} version ${index.version} of ${of} expired at ${index.expires}: a stale copy replayed to freeze this node (freeze attack), or the repository was not re-signed in time`, index.expires!, [
      'the publisher renews it: localpuppet publish --repo DIR --sign KEY.pem (with no archive: a re-signing)',
    ], thing === 'index' ? undefined : {version: index.version ?? null})
  }

  return {repository: id, version: index.version, expires: index.expires!, warning: expiryWarning(`${thing} version ${index.version} of ${of}`, index.expires, now)}
}

/**
 * `memory` with the index accepted: versions only grow, and a repository's identity, once
 * pinned, changes only to one judgeIndex let through (--accept-repository, given here as
 * to judgeIndex), which starts its versions afresh, as judgeIndex judged it: also where no
 * id was pinned yet (versions from a publisher older than ids), or the next fetch would
 * refuse as a replay the very repository accepted. Also the channels it names
 * (`app/channels/name` → tag).
 */
export function rememberIndex(memory: AcceptedVersions, source: string, freshness: IndexFreshness, now: number, channels: Record<string, string> = {}, acceptRepository?: string): AcceptedVersions {
  const key = repositoryKey(source)
  const before = memory.repositories[key] as AcceptedIndex | undefined
  const at = new Date(now).toISOString()
  const fresh: AcceptedIndex = {repository: freshness.repository, version: freshness.version, expires: freshness.expires, acceptedAt: at}
  const replaced = before !== undefined && (acceptRepository === undefined ? before.repository !== null && freshness.repository !== null && before.repository !== freshness.repository : before.repository !== acceptRepository)
  let entry: AcceptedIndex
  if (before === undefined || replaced) {
    // First seen, or another repository accepted on purpose (--accept-repository): its versions start afresh.
    entry = fresh
  } else {
    // An older version is never remembered over a newer one; the same index again changes nothing (not even when it was accepted).
    // An id, once pinned, stays; the first index that has one pins it.
    const repository = before.repository ?? freshness.repository
    const same = before.version === freshness.version && before.expires === freshness.expires
    const keep = same || (before.version !== null && (freshness.version === null || before.version > freshness.version))
    entry = keep ? (before.repository === repository ? before : {...before, repository}) : {...fresh, repository}
  }

  const next: AcceptedVersions = {...memory, repositories: {...memory.repositories, [key]: entry}}
  const remembered = {...memory.channels}
  for (const [channel, tag] of Object.entries(channels)) {
    const old = remembered[channel]
    if (old?.tag !== tag || old.source !== key || old.version !== freshness.version) remembered[channel] = {tag, source: key, version: freshness.version, at}
  }

  if (Object.keys(remembered).length > 0) next.channels = remembered
  return next
}

/** What the node remembers of channels, as `app/channels/name` → tag (for resolving without a fetch). */
export async function rememberedChannels(moduleDir: string, allowUntrusted = false): Promise<Record<string, string>> {
  const {memory} = await readAcceptedVersions(moduleDir, allowUntrusted)
  return Object.fromEntries(Object.entries(memory.channels ?? {}).map(([channel, entry]) => [channel, entry.tag]))
}

/**
 * Judges an index from `source` against what the node accepted from it before (its
 * identity, versions) and remembers it, with its channels whose tags are here (see
 * installedChannels): under a lock in the module directory's
 * `.localpuppet`, so two fetches at once cannot lower what is remembered. The file is
 * believed only when nobody but root (or the effective user) could have written it (77,
 * unless `allowUntrusted`, when the problem is returned to be reported).
 */
export async function acceptIndex(
  moduleDir: string,
  source: string,
  index: IndexHeader,
  options: {allowUntrusted?: boolean; now?: number; channels?: Record<string, string>; acceptRepository?: string; expectedRepository?: ExpectedRepository} = {},
): Promise<IndexFreshness & {untrusted: string[]}> {
  return changeAcceptedVersions(moduleDir, options.allowUntrusted, async (memory, untrusted) => {
    const now = options.now ?? Date.now()
    const freshness = judgeIndex(memory, source, index, now, options.acceptRepository, options.expectedRepository)
    const channels = await installedChannels(moduleDir, memory, options.channels ?? {})
    return {next: rememberIndex(memory, source, freshness, now, channels, options.acceptRepository ?? options.expectedRepository?.id), result: {...freshness, untrusted}}
  })
}

/**
 * After a fetch installed releases: the channels of the index it accepted (acceptIndex)
 * whose tags are now here are remembered (see installedChannels). Nothing, when another
 * fetch accepted a newer index from the source meanwhile: its channels are the newer ones.
 */
export async function rememberInstalledChannels(moduleDir: string, source: string, index: IndexHeader, channels: Record<string, string>, options: {allowUntrusted?: boolean; now?: number} = {}): Promise<void> {
  await changeAcceptedVersions(moduleDir, options.allowUntrusted, async (memory) => {
    const entry = memory.repositories[repositoryKey(source)]
    if (entry === undefined || entry.version !== (index.version ?? null) || entry.repository !== (index.repository ?? null)) return {next: memory, result: undefined}
    const freshness = {repository: entry.repository, version: entry.version, expires: entry.expires, warning: null}
    return {next: rememberIndex(memory, source, freshness, options.now ?? Date.now(), await installedChannels(moduleDir, memory, channels)), result: undefined}
  })
}

/**
 * repositories.json changed under a lock in the module directory's `.localpuppet`, so two
 * fetches at once cannot lower what is remembered: `change` gets it as read (judged before
 * it is believed) and gives what to write, which is written only when it differs.
 */
async function changeAcceptedVersions<T>(moduleDir: string, allowUntrusted: boolean | undefined, change: (memory: AcceptedVersions, untrusted: string[]) => Promise<{next: AcceptedVersions; result: T}>): Promise<T> {
  const own = localpuppetDir(moduleDir)
  try {
    // Not recursive: a module directory that is not there is an error (66), never made here.
    await mkdir(own, {mode: 0o755})
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw describeFsError(error, `module directory ${moduleDir}`)
  }

  const lock = await RunLock.acquireFileWaiting(join(own, LOCK_FILE), 30_000)
  try {
    const {memory, untrusted} = await readAcceptedVersions(moduleDir, allowUntrusted)
    const {next, result} = await change(memory, untrusted)
    // The same index fetched again (every timer run while nothing is published) writes nothing.
    if (JSON.stringify(next) !== JSON.stringify(memory)) {
      try {
        await writeFileAtomic(acceptedVersionsPath(moduleDir), JSON.stringify(next, null, 1) + '\n', 0o644)
      } catch (error) {
        throw describeFsError(error, acceptedVersionsPath(moduleDir))
      }
    }

    return result
  } finally {
    await lock.release()
  }
}

/**
 * The channels of an accepted index the node may remember now: each it has not read yet,
 * and one that moved only once the tag it names now is installed here (has its install
 * record). Until then the node keeps the tag it has: a fetch that cannot download the new
 * tag (a mirror that syncs the index before the archives, an outage) falls back to the
 * release the node runs, not to one it does not have. The fetch that installs the tag
 * remembers the channel again (RepositorySource.fetch).
 */
async function installedChannels(moduleDir: string, memory: AcceptedVersions, channels: Record<string, string>): Promise<Record<string, string>> {
  const remembered: Record<string, string> = {}
  for (const [channel, tag] of Object.entries(channels)) {
    const before = memory.channels?.[channel]
    if (before !== undefined && before.tag !== tag) {
      const release = `${channel.slice(0, channel.indexOf('/channels/'))}/tags/${tag}`
      if (!(await stat(recordPath(moduleDir, release)).then(() => true, () => false))) continue
    }

    remembered[channel] = tag
  }

  return remembered
}

/** repositories.json, judged before it is believed; empty when there is none yet. */
export async function readAcceptedVersions(moduleDir: string, allowUntrusted = false): Promise<{memory: AcceptedVersions; untrusted: string[]}> {
  const path = acceptedVersionsPath(moduleDir)
  let handle
  try {
    handle = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return {memory: {format: 2, repositories: {}}, untrusted: []}
    if ((error as NodeJS.ErrnoException).code === 'ELOOP') throw new DamagedRecordError(`${path}: a symbolic link, not the node's own record of accepted repository versions`, [`remove it: rm ${path}`])
    throw describeFsError(error, path)
  }

  try {
    // By path (every directory on the way) and by the opened file itself: whoever could write
    // it could lower a version and let a replayed index through.
    const problem = openedPathTrustProblem(path, await handle.stat(), {what: 'accepted repository versions', below: localpuppetDir(moduleDir)})
    refuseUnlessAllowed(problem, {allow: allowUntrusted})
    const memory = parseAcceptedVersions(await handle.readFile('utf8'), path)
    return {memory, untrusted: problem ? [problem.message] : []}
  } finally {
    await handle.close()
  }
}

/**
 * 65 for anything but the shape this file writes. Format 1 (versions per source and signing
 * key, before repository ids) is read as format 2: per source, the highest version any key
 * had, no identity pinned yet.
 */
export function parseAcceptedVersions(text: string, path: string): AcceptedVersions {
  const damaged = (why: string): never => {
    throw new DamagedRecordError(`${path} is damaged: ${why}`, [`remove it to start over (this node then forgets which repositories and index versions it accepted): rm ${path}`])
  }

  let doc: any
  try {
    doc = JSON.parse(text)
  } catch (error) {
    return damaged(`not valid JSON (${(error as Error).message})`)
  }

  if (!isMapping(doc) || (doc.format !== 1 && doc.format !== 2) || !isMapping(doc.repositories)) damaged('not a record of accepted repository versions')
  const validEntry = (e: any): e is AcceptedIndex =>
    e !== null && typeof e === 'object' && (e.version === null || (Number.isSafeInteger(e.version) && e.version >= 1)) && (e.expires === null || typeof e.expires === 'string') && typeof e.acceptedAt === 'string'
  const repositories: Record<string, AcceptedIndex> = {}
  for (const [source, entry] of Object.entries(doc.repositories as Record<string, any>)) {
    if (!isMapping(entry)) return damaged(`${source}: not an object`)
    if (doc.format === 1) {
      const entries: unknown[] = Object.values(entry)
      if (entries.length === 0) continue
      if (!entries.every(validEntry)) return damaged(`${source}: invalid entry`)
      const highest = (entries as AcceptedIndex[]).reduce((a, b) => ((b.version ?? 0) > (a.version ?? 0) ? b : a))
      repositories[source] = {repository: null, version: highest.version, expires: highest.expires, acceptedAt: highest.acceptedAt}
      continue
    }

    if (!validEntry(entry) || !(entry.repository === null || (typeof entry.repository === 'string' && REPOSITORY_ID.test(entry.repository)))) damaged(`${source}: invalid entry`)
    repositories[source] = entry as unknown as AcceptedIndex
  }

  if (doc.channels !== undefined) {
    if (!isMapping(doc.channels)) damaged('channels is not an object')
    for (const [channel, entry] of Object.entries(doc.channels as Record<string, unknown>)) {
      const e = entry as RememberedChannel
      if (!/^[A-Za-z0-9][A-Za-z0-9_.-]*\/channels\/[a-z][a-z0-9_-]*$/.test(channel) || !isMapping(e) || typeof e.tag !== 'string' || !isValidVersionName(e.tag)) damaged(`channel ${channel}: invalid entry`)
    }
  }

  return {format: 2, repositories, ...(doc.channels === undefined ? {} : {channels: doc.channels})}
}
