import {execa, getOneMessage, sendMessage} from 'execa'

import type {RunFetch} from '../run/run-plan.js'
import type {RunRecord} from '../state/run-record.js'
import type {AttemptOptions} from './options.js'

/** What the parent sends the detached process: everything it needs, already checked. */
export interface DetachPayload {
  /** The input file (--save rewrites it), or `-`. */
  input: string
  /** The attempt's options (puppet's arguments resolved), for the run itself. */
  options: AttemptOptions
  /** The input as the parent read and judged it: the background half does not read it again. */
  inputText: string
  source: string
  runId: string
  /** What --allow-untrusted let through in the parent, for the run record. */
  untrustedBefore: string[]
  /** What the parent's --fetch brought, and the tag the input's reference is pinned to (none: it fell back to what is installed). */
  fetched: {fetched: RunFetch; release?: string} | null
}

/** The detached process's one reply: its run started (the record exists), or why not. */
export type DetachReply =
  | {type: 'started'; record: RunRecord}
  | {type: 'error'; error: {code: string; exitCode: number; message: string; suggestions?: string[]}; recorded?: boolean}

/**
 * Starts `node ENTRY apply --detached-child` in a session of its own (it survives the
 * caller's exit and hangup), hands it the payload over an IPC channel, waits for its one
 * reply, then lets it go: the caller can exit at once.
 */
export async function startDetached(entry: string, payload: DetachPayload): Promise<DetachReply> {
  const child = execa(process.execPath, [entry, 'apply', '--detached-child'], {
    detached: true,
    cleanup: false,
    reject: false,
    ipc: true,
    serialization: 'json',
    stdin: 'ignore',
    stdout: 'ignore',
    stderr: 'ignore',
  })
  try {
    await child.sendMessage(payload as never)
    return (await child.getOneMessage()) as unknown as DetachReply
  } catch {
    return {type: 'error', error: {code: 'internal', exitCode: 70, message: 'the detached run exited before it started (a bug: run without --detach to see why)'}}
  } finally {
    child.disconnect()
    child.unref()
  }
}

/** The detached side: the payload from the parent. */
export async function receivePayload(): Promise<DetachPayload> {
  if (!process.send) throw new Error('--detached-child is internal: started by apply --detach')
  return (await getOneMessage()) as unknown as DetachPayload
}

/** The detached side: replies once, then drops the channel so the parent can go. */
export async function replyToParent(reply: DetachReply): Promise<void> {
  // The caller may be gone already (its ssh session hung up): the run goes on regardless.
  if (!process.send || !process.connected) return
  try {
    await sendMessage(reply as never)
    process.disconnect()
  } catch {
    // The parent hung up meanwhile: the run goes on regardless.
  }
}
