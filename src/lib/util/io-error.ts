/**
 * An IoError (74) for a system error that is an I/O failure (a full disk, a quota, a
 * read-only or failing device), naming what was being done; null for any other error.
 * It lives with the errors (describeFsError uses it too); this is where util code finds it.
 */
export {asIoError} from '../errors.js'
