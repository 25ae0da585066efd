import {constants} from 'node:os'

import {ExitCode} from './exit-codes.js'

/**
 * Every failure localpuppet expects carries a stable `code`, the process exit code and a
 * one-line message. Anything that is not a LocalpuppetError is a bug (exit 70).
 */
export class LocalpuppetError extends Error {
  readonly code: string
  readonly exitCode: number
  readonly suggestions: string[]

  constructor(code: string, exitCode: number, message: string, suggestions: string[] = []) {
    super(message)
    this.name = new.target.name
    this.code = code
    this.exitCode = exitCode
    this.suggestions = suggestions
  }

  toJSON(): {code: string; exitCode: number; message: string; suggestions?: string[]} {
    return {
      code: this.code,
      exitCode: this.exitCode,
      message: this.message,
      ...(this.suggestions.length > 0 ? {suggestions: this.suggestions} : {}),
    }
  }
}

/** A flag or argument the command cannot use (64). */
export class UsageError extends LocalpuppetError {
  constructor(message: string, suggestions: string[] = []) {
    super('usage', ExitCode.usage, message, suggestions)
  }
}

/** Input YAML or schema is wrong (65). */
export class InputError extends LocalpuppetError {
  constructor(message: string, suggestions: string[] = []) {
    super('invalid-input', ExitCode.invalid, message, suggestions)
  }
}

/** A release reference, manifest.yaml or modulepath is wrong (65). */
export class ReleaseError extends LocalpuppetError {
  constructor(message: string, suggestions: string[] = []) {
    super('invalid-release', ExitCode.invalid, message, suggestions)
  }
}

/** A tagged release depends on something mutable (65). */
export class ImmutabilityError extends LocalpuppetError {
  constructor(message: string, suggestions: string[] = []) {
    super('mutable-dependency', ExitCode.invalid, message, suggestions)
  }
}

/** A path leaves the module directory once symlinks are followed (65). */
export class PathEscapeError extends LocalpuppetError {
  constructor(message: string) {
    super('path-escape', ExitCode.invalid, message)
  }
}

/** A file, directory, release or run that is not there (66). */
export class NotFoundError extends LocalpuppetError {
  constructor(message: string, suggestions: string[] = []) {
    super('not-found', ExitCode.notFound, message, suggestions)
  }
}

/** Puppet cannot be started (69). */
export class PuppetUnavailableError extends LocalpuppetError {
  constructor(message: string, suggestions: string[] = []) {
    super('puppet-unavailable', ExitCode.unavailable, message, suggestions)
  }
}

/** A release repository (or another service localpuppet needs) cannot be reached (69). */
export class RepositoryUnavailableError extends LocalpuppetError {
  constructor(message: string, suggestions: string[] = []) {
    super('repository-unavailable', ExitCode.unavailable, message, suggestions)
  }
}

/** Another run holds the state directory's lock (73). */
export class LockHeldError extends LocalpuppetError {
  readonly holder: {pid: number; runId: string | null}

  constructor(message: string, holder: {pid: number; runId: string | null}) {
    super('locked', ExitCode.locked, message)
    this.holder = holder
  }
}

/** Puppet is disabled (`puppet agent --disable`, `localpuppet disable`): runs are refused (73). */
export class PuppetDisabledError extends LocalpuppetError {
  constructor(message: string) {
    super('puppet-disabled', ExitCode.locked, message)
  }
}

/** A tag is already installed with other content (73): tags are immutable. */
export class ConflictError extends LocalpuppetError {
  constructor(message: string, suggestions: string[] = []) {
    super('conflict', ExitCode.locked, message, suggestions)
  }
}

/** An installed release no longer matches what was installed (65). */
export class VerificationError extends LocalpuppetError {
  constructor(message: string, suggestions: string[] = []) {
    super('verification-failed', ExitCode.invalid, message, suggestions)
  }
}

/** Reading or writing failed on the machine's side: a full disk, an I/O error (74, sysexits' EX_IOERR). */
export class IoError extends LocalpuppetError {
  constructor(message: string, suggestions: string[] = []) {
    super('io-error', ExitCode.ioError, message, suggestions)
  }
}

/**
 * A directory or file localpuppet must trust is owned by another user or writable by
 * group or others (77, sysexits' EX_NOPERM): root would run or delete what they put there.
 */
export class UntrustedPathError extends LocalpuppetError {
  constructor(message: string, suggestions: string[] = []) {
    super('untrusted-path', ExitCode.noPerm, message, suggestions)
  }
}

/** A run record (run.json) that is not one: garbage, null, too large (65, naming the file). */
export class DamagedRecordError extends LocalpuppetError {
  constructor(message: string, suggestions: string[] = []) {
    super('damaged-record', ExitCode.invalid, message, suggestions)
  }
}

/** The run exceeded --timeout (75). */
export class TimeoutError extends LocalpuppetError {
  constructor(message: string) {
    super('timeout', ExitCode.tempFail, message)
  }
}

/** The run was stopped by a signal: 128 + its number, as a shell reports it (SIGHUP 129, SIGINT 130, SIGTERM 143). */
export class InterruptedError extends LocalpuppetError {
  readonly signal: NodeJS.Signals

  constructor(signal: NodeJS.Signals) {
    super('interrupted', 128 + (constants.signals[signal] ?? ExitCode.sigterm - 128), `interrupted by ${signal}`)
    this.signal = signal
  }
}

/** The run is still going (75): `status` of a running run. */
export class StillRunningError extends LocalpuppetError {
  constructor(message: string) {
    super('running', ExitCode.tempFail, message)
  }
}

/** Wraps a Node system error (ENOENT, EACCES, ...) on a named path into a one-line error. */
export function describeFsError(error: unknown, what: string): LocalpuppetError {
  const io = asIoError(error, what)
  if (io) return io
  const code = (error as NodeJS.ErrnoException)?.code
  if (code === 'ENOENT' || code === 'ENOTDIR') return new NotFoundError(`${what}: not found`)
  if (code === 'EACCES' || code === 'EPERM') return new NotFoundError(`${what}: permission denied`)
  if (code === 'EISDIR') return new InputError(`${what}: is a directory, expected a file`)
  if (code === 'ELOOP') return new PathEscapeError(`${what}: too many levels of symbolic links`)
  if (code === 'ENAMETOOLONG') return new InputError(`${what.length > 200 ? `${what.slice(0, 200)}...` : what}: a name or path too long for the file system`)
  throw error
}

/** The fleet's transport cannot be used at all (mco missing, the broker unreachable): 69; a rollout stays resumable. */
export class FleetUnavailableError extends LocalpuppetError {
  constructor(message: string, suggestions: string[] = []) {
    super('fleet-unavailable', ExitCode.unavailable, message, suggestions)
  }
}

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
