import {isMapping} from '../util/json.js'

/** A yanked tag's record, on its tag entry in the index (`yanked`: `repository yank`). */
export interface YankRecord {
  at: string
  reason: string
  /** The key id that signed the index the yank was made in, or null (an unsigned repository). */
  by: string | null
}

/** An override's or a yank's reason: one line of at most this many characters. */
export const MAX_REASON_CHARS = 500
/** As Date.prototype.toISOString writes it. */
const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,3})?Z$/
const KEY_ID = /^sha256:[0-9a-f]{64}$/

export const isRecordTime = (value: unknown): value is string => typeof value === 'string' && ISO_TIME.test(value) && !Number.isNaN(Date.parse(value))
export const isSigner = (value: unknown): value is string | null => value === null || (typeof value === 'string' && KEY_ID.test(value))
/** A reason as read from an index: the publisher writes at most MAX_REASON_CHARS; twice that is still believed. */
export const isReason = (value: unknown): value is string => typeof value === 'string' && value.length > 0 && value.length <= MAX_REASON_CHARS * 2

/**
 * Why a tag entry's `yanked` is not a yank record, or null when it is one. Nodes read it
 * (parseRepositoryIndex), so a malformed one refuses the whole index, as any malformed tag
 * entry does: a yank is never silently ignored by a node that knows yanks.
 */
export function yankRecordProblem(value: unknown): string | null {
  if (!isMapping(value)) return 'yanked is not an object'
  if (!isRecordTime(value.at)) return `yanked.at ${JSON.stringify(value.at)} is not an ISO 8601 time`
  if (!isReason(value.reason)) return 'yanked.reason is not a reason'
  if (!isSigner(value.by)) return `yanked.by ${JSON.stringify(value.by)} is not a key id or null`
  return null
}
