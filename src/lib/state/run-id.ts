import {randomBytes} from 'node:crypto'

import {UsageError} from '../errors.js'

/** What `plan` shows where apply will put a fresh run id. */
export const RUN_ID_PLACEHOLDER = '<run-id>'

const RUN_ID = /^\d{8}T\d{6}\.\d{3}Z-[0-9a-f]{4}$/

/**
 * A run id that sorts by start time as a plain string: `20261122T091631.123Z-4f2a`
 * (UTC, milliseconds, then random hex so two hosts' ids never collide).
 */
export function newRunId(now = new Date()): string {
  const stamp = now.toISOString().replaceAll('-', '').replaceAll(':', '')
  return `${stamp}-${randomBytes(2).toString('hex')}`
}

export function isRunId(text: string): boolean {
  return RUN_ID.test(text)
}

/** Refuses anything that is not a run id, before it is ever joined into a path. */
export function assertRunId(text: string): string {
  if (!isRunId(text)) throw new UsageError(`${JSON.stringify(text)} is not a run id (e.g. 20261122T091631.123Z-4f2a); localpuppet history lists them`)
  return text
}
