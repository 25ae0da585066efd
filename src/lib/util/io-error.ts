import {IoError} from '../errors.js'

/** System errors that mean the machine could not store or read the data, not that the input is wrong. */
const IO_FAILURES: Record<string, string> = {
  ENOSPC: 'no space left on the device',
  EDQUOT: 'disk quota exceeded',
  EIO: 'input/output error',
  EROFS: 'read-only file system',
  EFBIG: 'file too large for the file system',
  EPIPE: 'closed by the reader',
}

/**
 * An IoError (74) for a system error that is an I/O failure (a full disk, a quota, a
 * read-only or failing device), naming what was being done; null for any other error.
 */
export function asIoError(error: unknown, what?: string): IoError | null {
  if (error instanceof IoError) return error
  const code = (error as NodeJS.ErrnoException)?.code
  if (typeof code !== 'string' || !(code in IO_FAILURES)) return null
  const path = (error as NodeJS.ErrnoException).path
  return new IoError(`${what === undefined ? '' : `${what}: `}${IO_FAILURES[code]}${path ? ` (${path})` : ''}`, code === 'ENOSPC' || code === 'EDQUOT' ? ['free space on that file system and try again'] : [])
}
