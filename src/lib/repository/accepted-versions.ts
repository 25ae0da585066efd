import {constants} from 'node:fs'
import {mkdir, open} from 'node:fs/promises'
import {join} from 'node:path'

import {DamagedRecordError, ReleaseError, describeFsError} from '../errors.js'
import {localpuppetDir} from '../install/install-record.js'
import {isValidVersionName} from '../release/release-ref.js'
import {RunLock} from '../state/lock.js'
import {writeFileAtomic} from '../util/atomic-write.js'
import {openedPathTrustProblem, refuseUnlessAllowed} from '../util/trusted-path.js'
import type {RepositoryIndex} from './repository-index.js'

/** In the module directory's `.localpuppet/`: what the node accepted from each repository. */
export const ACCEPTED_VERSIONS_FILE = 'repositories.json'
const LOCK_FILE = 'repositories.lock'
/** The key under which an index accepted without a trusted key is remembered. */
export const UNSIGNED = 'unsigned'

/** What a node accepted from one repository under one key. */
export interface AcceptedIndex {
  /** The highest index version accepted; null: only indexes without a version (older publishers) so far. */
  version: number | null
  expires: string | null
  acceptedAt: string
}

/** repositories.json: per repository (its normalised source), per key fingerprint (or `unsigned`). */
export interface AcceptedVersions {
  format: 1
  repositories: Record<string, Record<string, AcceptedIndex>>
  /**
   * The tag each channel (`foo/channels/stable`) named in the newest index accepted that
   * has it: how an input on a channel resolves when the repository cannot be reached, or
   * for plan and apply without --fetch. Absent before channels.
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

/** The outcome of an index judged fresh: the version and expiry to report, and a warning for a person, if any. */
export interface IndexFreshness {
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

/**
 * Judges an index against what the node accepted before, without I/O. An index older than
 * one accepted from the same repository and key is a replay (65, naming both versions); an
 * expired one may be a replay that froze the node (65, naming the date); an index without a
 * version is accepted (with a warning) only while nothing versioned came from the repository.
 * Equal versions are fine: the same index fetched again.
 */
export function judgeIndex(memory: AcceptedVersions, source: string, signer: string | null, index: Pick<RepositoryIndex, 'version' | 'expires'>, now: number): IndexFreshness {
  const known = memory.repositories[repositoryKey(source)] ?? {}
  const accepted = known[signer ?? UNSIGNED]
  if (index.version === undefined) {
    const versioned = Object.values(known).find((entry) => entry.version !== null)
    if (versioned) {
      throw new ReleaseError(`index of ${source} has no version (made by an older localpuppet), but version ${versioned.version} was already accepted from it: a replay (rollback attack)?`, [
        'a mirror or proxy may be serving an old copy; re-publish the repository (publish --repo DIR --sign KEY.pem) and check its mirrors',
      ])
    }

    const warning =
      Object.keys(known).length === 0
        ? `index of ${source} has no version or expiry (published by an older localpuppet): nothing stops an old copy from being replayed; re-publish it with this localpuppet (publish --repo DIR --sign KEY.pem)`
        : null
    return {version: null, expires: null, warning}
  }

  if (accepted?.version != null && index.version < accepted.version) {
    throw new ReleaseError(`index version ${index.version} of ${source} is older than version ${accepted.version} already accepted from it: a replay (rollback attack)?`, [
      'a mirror or proxy may be serving an old copy: check it against the repository',
      `a repository rebuilt from scratch starts again at 1: re-sign it (publish --repo DIR --sign KEY.pem) until it passes ${accepted.version}, or make this node forget it (its entry in ${ACCEPTED_VERSIONS_FILE} under the module directory's .localpuppet)`,
    ])
  }

  if (Date.parse(index.expires!) <= now) {
    throw new ReleaseError(`index version ${index.version} of ${source} expired at ${index.expires}: a stale copy replayed to freeze this node (freeze attack), or the repository was not re-signed in time`, [
      'the publisher renews it: localpuppet publish --repo DIR --sign KEY.pem (with no archive: a re-signing)',
    ])
  }

  return {version: index.version, expires: index.expires!, warning: null}
}

/** `memory` with the index accepted (versions only grow), and the channels it names (`app/channels/name` → tag). */
export function rememberIndex(memory: AcceptedVersions, source: string, signer: string | null, freshness: IndexFreshness, now: number, channels: Record<string, string> = {}): AcceptedVersions {
  const key = repositoryKey(source)
  const known = {...memory.repositories[key]}
  const before = known[signer ?? UNSIGNED]
  // An older version is never remembered over a newer one; the same index again changes nothing (not even when it was accepted).
  const same = before !== undefined && before.version === freshness.version && before.expires === freshness.expires
  const keep = same || (before?.version != null && (freshness.version === null || before.version > freshness.version))
  known[signer ?? UNSIGNED] = keep ? before : {version: freshness.version, expires: freshness.expires, acceptedAt: new Date(now).toISOString()}
  const next: AcceptedVersions = {...memory, repositories: {...memory.repositories, [key]: known}}
  const at = new Date(now).toISOString()
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
 * Judges an index from `source` (signed by `signer`, or null) against the versions the
 * node accepted before and remembers it: under a lock in the module directory's
 * `.localpuppet`, so two fetches at once cannot lower what is remembered. The file is
 * believed only when nobody but root (or the effective user) could have written it (77,
 * unless `allowUntrusted`, when the problem is returned to be reported).
 */
export async function acceptIndex(
  moduleDir: string,
  source: string,
  signer: string | null,
  index: Pick<RepositoryIndex, 'version' | 'expires'>,
  options: {allowUntrusted?: boolean; now?: number; channels?: Record<string, string>} = {},
): Promise<IndexFreshness & {untrusted: string[]}> {
  const own = localpuppetDir(moduleDir)
  try {
    // Not recursive: a module directory that is not there is an error (66), never made here.
    await mkdir(own, {mode: 0o755})
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw describeFsError(error, `module directory ${moduleDir}`)
  }

  const lock = await RunLock.acquireFileWaiting(join(own, LOCK_FILE), 30_000)
  try {
    const {memory, untrusted} = await readAcceptedVersions(moduleDir, options.allowUntrusted)
    const now = options.now ?? Date.now()
    const freshness = judgeIndex(memory, source, signer, index, now)
    const next = rememberIndex(memory, source, signer, freshness, now, options.channels)
    // The same index fetched again (every timer run while nothing is published) writes nothing.
    if (JSON.stringify(next) !== JSON.stringify(memory)) {
      try {
        await writeFileAtomic(acceptedVersionsPath(moduleDir), JSON.stringify(next, null, 1) + '\n', 0o644)
      } catch (error) {
        throw describeFsError(error, acceptedVersionsPath(moduleDir))
      }
    }

    return {...freshness, untrusted}
  } finally {
    await lock.release()
  }
}

/** repositories.json, judged before it is believed; empty when there is none yet. */
export async function readAcceptedVersions(moduleDir: string, allowUntrusted = false): Promise<{memory: AcceptedVersions; untrusted: string[]}> {
  const path = acceptedVersionsPath(moduleDir)
  let handle
  try {
    handle = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return {memory: {format: 1, repositories: {}}, untrusted: []}
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

/** 65 for anything but the shape this file writes. */
export function parseAcceptedVersions(text: string, path: string): AcceptedVersions {
  const damaged = (why: string): never => {
    throw new DamagedRecordError(`${path} is damaged: ${why}`, [`remove it to start over (this node then forgets which index versions it accepted): rm ${path}`])
  }

  let doc: any
  try {
    doc = JSON.parse(text)
  } catch (error) {
    return damaged(`not valid JSON (${(error as Error).message})`)
  }

  if (doc?.format !== 1 || !isObject(doc.repositories)) damaged('not a record of accepted repository versions')
  for (const [source, keys] of Object.entries(doc.repositories as Record<string, unknown>)) {
    if (!isObject(keys)) return damaged(`${source}: not an object`)
    for (const [key, entry] of Object.entries(keys)) {
      const e = entry as AcceptedIndex
      if (!isObject(e) || !(e.version === null || (Number.isSafeInteger(e.version) && e.version >= 1)) || !(e.expires === null || typeof e.expires === 'string')) {
        damaged(`${source} ${key}: invalid entry`)
      }
    }
  }

  if (doc.channels !== undefined) {
    if (!isObject(doc.channels)) damaged('channels is not an object')
    for (const [channel, entry] of Object.entries(doc.channels as Record<string, unknown>)) {
      const e = entry as RememberedChannel
      if (!/^[A-Za-z0-9][A-Za-z0-9_.-]*\/channels\/[a-z][a-z0-9_-]*$/.test(channel) || !isObject(e) || typeof e.tag !== 'string' || !isValidVersionName(e.tag)) damaged(`channel ${channel}: invalid entry`)
    }
  }

  return doc as AcceptedVersions
}

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value)
}
