import {createHash} from 'node:crypto'
import type {Stats} from 'node:fs'
import {rm} from 'node:fs/promises'
import {join} from 'node:path'

import {describeFsError} from '../errors.js'
import {localpuppetDir} from '../install/install-record.js'
import {MAX_REPOSITORY_INDEX_BYTES, type RepositoryIndex, parseRepositoryIndex} from '../repository/repository-index.js'
import type {Validators} from './validators.js'
import {writeFileAtomic} from '../util/atomic-write.js'
import {isMapping} from '../util/json.js'
import {readTrustedCache} from '../util/trusted-cache.js'
import {openedPathTrustProblem} from '../util/trusted-path.js'

/** The index (and signature) a node accepted last from one repository, with the validators its server gave them. */
export interface KeptIndex {
  validators: Validators
  /** The index's bytes, exactly as signed. */
  bytes: Buffer
  /** Its signature's bytes; null when the repository was read without a trusted key. */
  signature: Buffer | null
  /** The kept bytes, parsed as a fresh answer is. */
  index: RepositoryIndex
}

/** The largest kept file believed: the largest index, its signature in base64, with room for the rest. */
const MAX_KEPT_BYTES = MAX_REPOSITORY_INDEX_BYTES + 256 * 1024

/** `.localpuppet/kept-index-<sha256 of the repository's key>`: one per repository the node reads. */
export function keptIndexPath(moduleDir: string, repositoryKey: string): string {
  return join(localpuppetDir(moduleDir), `kept-index-${createHash('sha256').update(repositoryKey).digest('hex').slice(0, 32)}`)
}

/**
 * The kept copy of a repository's index, if this node holds one it may ask about: readable,
 * written by nobody but root (or the effective user), of the repository named, and of the
 * very version and repository id this node accepted last (`accepted`), so that a 304 can
 * only ever stand for the index already accepted: never an older one (a replay), never one
 * the node does not hold. Anything else, damaged or missing, is no copy (null): the node
 * then asks for the index as a node without a copy does. Never throws.
 */
export async function usableKeptIndex(
  moduleDir: string,
  repositoryKey: string,
  accepted: {version: number | null; repository: string | null} | undefined,
  /** How the kept bytes are parsed: as an index, or (node-documents/) as a node's document. */
  parse: (bytes: Buffer, where: string) => RepositoryIndex = parseRepositoryIndex,
): Promise<KeptIndex | null> {
  if (accepted?.version == null) return null
  const path = keptIndexPath(moduleDir, repositoryKey)
  const trusted = (info: Stats) => openedPathTrustProblem(path, info, {what: 'kept repository index', below: localpuppetDir(moduleDir)}) === null
  return readTrustedCache(path, MAX_KEPT_BYTES, trusted, (file) => {
    // A line of JSON (what the index is kept with), then the index's bytes as signed: no copy of 3 MB decoded twice on every tick.
    const end = file.indexOf(0x0a)
    if (end < 0) return null
    const head: unknown = JSON.parse(file.subarray(0, end).toString('utf8'))
    if (!isMapping(head) || head.format !== 2 || head.repository !== repositoryKey || !isMapping(head.validators)) return null
    const {etag, lastModified} = head.validators as Record<string, unknown>
    const validators: Validators = {...(typeof etag === 'string' ? {etag} : {}), ...(typeof lastModified === 'string' ? {lastModified} : {})}
    if (validators.etag === undefined && validators.lastModified === undefined) return null
    if (!(head.signature === null || typeof head.signature === 'string')) return null
    const bytes = file.subarray(end + 1)
    const index = parse(bytes, path)
    if (index.version !== accepted.version || (index.repository ?? null) !== accepted.repository) return null
    return {validators, bytes, signature: head.signature === null ? null : Buffer.from(head.signature, 'base64'), index}
  })
}

/**
 * Keeps the index just accepted from a repository (its bytes and signature as read, the
 * server's validators), replacing the copy kept before, atomically; with no validators the
 * server cannot answer a conditional request, and any copy kept is removed.
 */
export async function keepIndex(moduleDir: string, repositoryKey: string, read: {bytes: Buffer; signature: Buffer | null; validators: Validators}): Promise<void> {
  const path = keptIndexPath(moduleDir, repositoryKey)
  try {
    if (read.validators.etag === undefined && read.validators.lastModified === undefined) {
      await rm(path, {force: true})
      return
    }

    const head = {format: 2, repository: repositoryKey, validators: read.validators, signature: read.signature?.toString('base64') ?? null}
    await writeFileAtomic(path, Buffer.concat([Buffer.from(JSON.stringify(head) + '\n'), read.bytes]), 0o644)
  } catch (error) {
    throw describeFsError(error, `kept repository index ${path}`)
  }
}
