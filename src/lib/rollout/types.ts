/*
 * The rollout engine's vocabulary: what nodes say (reports and answers), the events the
 * engine takes, the actions it asks for, and the state it keeps (which its record holds).
 * Types only: the decisions are in engine.ts.
 */

export type NodeState =
  | 'pending'
  | 'starting'
  | 'running'
  | 'busy'
  | 'succeeded'
  | 'failed'
  | 'refused'
  | 'deadline'
  | 'no answer'
  | 'up to date'
  | 'not started'
  /** Its run succeeded, but when the rollout ended another release had been applied on it since. */
  | 'overtaken'

/** `waiting`: the node's own late run (it missed its --deadline) is still going; the revert is sent once it ends. */
export type RevertState = 'pending' | 'waiting' | 'starting' | 'running' | 'succeeded' | 'failed' | 'refused' | 'busy' | 'deadline' | 'no answer' | 'no target' | 'not needed'

/** What a node says about one run: its run record, as much as the transport carries. */
export interface RunReport {
  runId: string
  state: string
  release: string | null
  ref?: string | null
  noop?: boolean
  startedAt?: string | null
  durationMs?: number | null
  exitCode?: number | null
  resources?: {changed: number; failed: number; outOfSync: number} | null
  /** The error, Puppet's own first error line, or the reason of a skip. */
  message?: string | null
}

/** What a node says about itself: before the rollout, after a soak, after a resume. */
export interface NodeReport {
  /** Its input's app. */
  pointer: string | null
  /** The release of its newest run that succeeded without --noop. */
  applied: string | null
  /** Its newest attempt, refused ones included. */
  newest: RunReport | null
  disabled?: string | null
  /** The newest noop run's out-of-sync count, or the newest run's corrective changes. */
  drift?: number | null
}

/** The answer to a start (apply or revert): the run it started, or why not. */
export type StartAnswer = {run: RunReport} | {exitCode: number; message: string; busy: boolean}

export type RolloutEvent =
  | {kind: 'surveyed'; at: number; answers: Record<string, NodeReport>}
  | {kind: 'dispatched'; at: number; purpose: 'apply' | 'revert'; nodes: string[]}
  | {kind: 'started'; at: number; purpose: 'apply' | 'revert'; nodes: string[]; answers: Record<string, StartAnswer>}
  | {kind: 'polled'; at: number; nodes: string[]; answers: Record<string, RunReport>}
  | {kind: 'rechecked'; at: number; group: number; nodes: string[]; answers: Record<string, NodeReport>}
  | {kind: 'adopted'; at: number; nodes: string[]; answers: Record<string, NodeReport>}
  /** Nodes the survey found silent, asked once more (briefly) when their turn comes. */
  | {kind: 'probed'; at: number; nodes: string[]; answers: Record<string, NodeReport>}
  /** The nodes that succeeded, asked once more before the rollout ends: still on what they ran? */
  | {kind: 'verified'; at: number; nodes: string[]; answers: Record<string, NodeReport>}
  | {kind: 'tick'; at: number}

export type RolloutAction =
  | {kind: 'survey'; nodes: string[]}
  | {kind: 'start'; nodes: string[]}
  | {kind: 'revert'; nodes: Array<{node: string; release: string; save: boolean}>}
  | {kind: 'poll'; runs: Array<{node: string; runId: string}>; waitMs: number}
  | {kind: 'recheck'; group: number; nodes: string[]}
  | {kind: 'adopt'; nodes: string[]}
  | {kind: 'probe'; nodes: string[]}
  | {kind: 'verify'; nodes: string[]}
  | {kind: 'wait'; until: number}
  | {kind: 'done'}

export interface RevertEntry {
  state: RevertState
  /** The release it goes back to (the node's applied release before the rollout). */
  release: string | null
  save: boolean
  runId: string | null
  dispatchedAt: number | null
  finishedAt: number | null
  message: string | null
  silent: number
  /** Its start got no answer: the node is asked once whether a run began before it counts as "no answer". */
  missed?: boolean
  /** `waiting`: the run waited for (the node's own late run), and since when. */
  waitFor?: string
  waitingSince?: number
  /** What the wait saw, kept in the record and shown with the revert's outcome. */
  waited?: string
  /** A revert answered busy is tried again at retryAt, until --deadline after its first busy answer (busySince). */
  retryAt?: number | null
  busySince?: number
}

export interface RolloutNode {
  node: string
  state: NodeState
  /** Which group it belongs to (0 is the canaries when there are any), or null (up to date). */
  group: number | null
  surveyed: boolean
  /** What it had applied before the rollout (its newest succeeded run without --noop). */
  before: string | null
  pointerBefore: string | null
  /** What it should run: REF, or its own input's app. */
  wanted: string | null
  runId: string | null
  /** The release its run applied. */
  release: string | null
  dispatchedAt: number | null
  finishedAt: number | null
  durationMs: number | null
  resources: {changed: number; failed: number; outOfSync: number} | null
  noop: boolean
  exitCode: number | null
  message: string | null
  busyTries: number
  retryAt: number | null
  silent: number
  /** Its start got no answer: the node is asked once whether a run began before it counts as "no answer". */
  missed?: boolean
  revert: RevertEntry | null
}

export type Phase = 'survey' | 'rolling' | 'reverting' | 'done'

export interface RolloutState {
  phase: Phase
  nodes: RolloutNode[]
  groups: number[][]
  /** When each group's last node became final (soaks count from it). */
  settledAt: Array<number | null>
  rechecked: boolean[]
  /** Why no further node is started, or null. */
  stopped: string | null
  allowedFailures: number
  startedAt: number | null
  finishedAt: number | null
  /** The last question before the end (the nodes that succeeded: still on what they ran?): due, then done. */
  verify?: 'due' | 'done'
}
