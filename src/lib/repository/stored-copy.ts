import {describeFsError} from '../errors.js'
import {FileChecker} from '../tree/hash-files.js'

/** How the repository holds a file its index lists: as listed, missing, or changed (another size or sha256, not a regular file). */
export type StoredCopy = 'intact' | 'missing' | 'changed'

/**
 * Checks the repository's copy of a file against its index entry as a release's files are
 * checked (hash-files.ts): opened without following a link or waiting on a FIFO, its size
 * first, then its sha256. A link, a directory or a FIFO in its place is `changed`; publish
 * writes the file again.
 */
export async function checkStoredCopy(path: string, expected: {size: number; sha256: string}): Promise<StoredCopy> {
  let check
  try {
    ;[check] = await new FileChecker(1).check([path], [expected.size])
  } catch (error) {
    throw describeFsError(error, path)
  }

  if (check.error === 'ENOENT') return 'missing'
  return check.sha256 === expected.sha256 ? 'intact' : 'changed'
}

