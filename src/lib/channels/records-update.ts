import {keyId, loadSigningKey} from '../archive/signature.js'
import {NotFoundError} from '../errors.js'
import {type ChannelRecords, readChannelRecords} from '../repository/channel-records.js'
import {type IndexUpdate, hasIndex, updateIndex} from '../repository/index-update.js'
import {REPOSITORY_INDEX, type RepositoryIndex} from '../repository/repository-index.js'

export interface RecordsUpdateOptions {
  /** Resolved. */
  repo: string
  signingKey?: string
  lockWaitMs?: number
  expiresInMs?: number
  now?: () => number
}

/** What a change of the channels' records is given: the index just read, its records (checked), who signs and when. */
export interface RecordsChange {
  index: RepositoryIndex
  records: ChannelRecords
  /** The key id signing the new index, or null. */
  by: string | null
  at: string
}

/**
 * Changes a repository's channels or tags under its lock, as publish and promote change the
 * index (updateIndex: next version, new expiry, signed, replaced last): 66 when there is no
 * repository there; the channels' records must read (65 naming the entry) before anything is
 * written over them.
 */
export async function updateRecords<T>(options: RecordsUpdateOptions, change: (records: RecordsChange) => Promise<T> | T): Promise<T & IndexUpdate> {
  if (!(await hasIndex(options.repo))) throw new NotFoundError(`no release repository at ${options.repo}: no ${REPOSITORY_INDEX}`, ['publish creates it: localpuppet publish ARCHIVE --repo DIR'])
  const key = options.signingKey ? await loadSigningKey(options.signingKey) : null
  const now = options.now ?? Date.now
  return updateIndex({repo: options.repo, key, lockWaitMs: options.lockWaitMs, expiresInMs: options.expiresInMs, now}, async (index) =>
    change({index, records: readChannelRecords(index, `${options.repo}/${REPOSITORY_INDEX}`), by: key ? keyId(key) : null, at: new Date(now()).toISOString()}),
  )
}
