import {randomBytes} from 'node:crypto'
import {renameSync} from 'node:fs'
import {open, unlink} from 'node:fs/promises'
import {basename, dirname, join} from 'node:path'
import {distinctMtime, stampMtime} from './distinct-mtime.js'

/**
 * Writes a file so that a reader sees either the old content or the new, never half:
 * a temporary file in the same directory, flushed to disk, then renamed over the target.
 * `owner`: given to the temporary file through its descriptor before the rename, never
 * by path afterwards (a path can have become a link to a file of someone's choosing).
 */
export async function writeFileAtomic(path: string, data: string | Uint8Array | Iterable<string>, mode = 0o600, owner?: {uid: number; gid: number}): Promise<void> {
  const prepared = await prepareFileAtomic(path, data, mode, owner)
  try {
    prepared.commit()
  } catch (error) {
    await prepared.abort()
    throw error
  }
}

/** A file written and flushed beside its target, not yet renamed over it. */
export interface PreparedFile {
  /** Renames it into place (synchronously: several commits in a row leave no gap for the event loop). */
  commit(): void
  /** Removes the temporary file if it was not committed. */
  abort(): Promise<void>
}

/**
 * The first half of writeFileAtomic: the temporary file written and fsynced. Preparing
 * several files and then committing them back to back makes the moment they disagree
 * (a reader, or a process killed in between) as short as two rename(2) calls.
 */
export async function prepareFileAtomic(path: string, data: string | Uint8Array | Iterable<string>, mode = 0o600, owner?: {uid: number; gid: number}, mtime?: Date): Promise<PreparedFile> {
  const temp = join(dirname(path), `.${basename(path)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`)
  const handle = await open(temp, 'wx', mode)
  try {
    if (owner) await handle.chown(owner.uid, owner.gid).catch(() => {})
    // Pieces (a large file written as it is made, never one string) go one after another.
    if (typeof data === 'string' || data instanceof Uint8Array) await handle.writeFile(data)
    else for (const piece of data) await handle.write(piece)
    if (mtime) await stampMtime(handle, mtime)
    await handle.sync()
  } catch (error) {
    await handle.close()
    await unlink(temp).catch(() => {})
    throw error
  }

  await handle.close()
  let committed = false
  return {
    commit() {
      renameSync(temp, path)
      committed = true
    },
    async abort() {
      if (!committed) await unlink(temp).catch(() => {})
    },
  }
}

/** The temporary files writeFileAtomic names `.<name>.<pid>.<hex>.tmp`: the pid that wrote it, or null for another name. */
export function atomicTempWriter(name: string): number | null {
  const match = /^\..+\.(\d+)\.[0-9a-f]{8}\.tmp$/.exec(name)
  return match ? Number(match[1]) : null
}

/**
 * A file and its detached signature (none: `signature` null), both written and flushed, then
 * renamed back to back, the signature first and the file last: a reader that gets the new
 * signature with the old file retries once and then sees both new, and a writer killed
 * between the two renames leaves them disagreeing for microseconds, until the next write.
 * Each gets an mtime whole seconds past the one it replaces (distinctMtime): these are the
 * files a node reads conditionally, and a web server's validators must change with them.
 */
export async function writeSignedFileAtomic(path: string, bytes: Buffer, signature: {path: string; bytes: Buffer} | null, mode = 0o644): Promise<void> {
  const signed = signature ? await prepareFileAtomic(signature.path, signature.bytes, mode, undefined, await distinctMtime(signature.path)) : null
  const file = await prepareFileAtomic(path, bytes, mode, undefined, await distinctMtime(path)).catch(async (error: unknown) => {
    await signed?.abort()
    throw error
  })
  try {
    signed?.commit()
    file.commit()
  } finally {
    await signed?.abort()
    await file.abort()
  }
}
