import type {RolloutSettings} from './settings.js'
import type {NodeState, RevertEntry, RolloutNode, RolloutState} from './types.js'

/*
 * A rollout's nodes: the state a rollout starts from, which node states are final and which
 * count against the failure budget, and the indexes the engine derives from the state (never
 * recorded) to keep every decision in proportion to the nodes in flight.
 */

/** States that count against the failure budget. */
export const COUNTED_STATES: readonly NodeState[] = ['failed', 'refused', 'deadline', 'no answer']
export const FINAL_STATES: readonly NodeState[] = ['succeeded', 'failed', 'refused', 'deadline', 'no answer', 'up to date', 'not started', 'busy', 'overtaken']

/** Final: a busy node only once it will not be tried again. */
export const isFinal = (node: RolloutNode): boolean => FINAL_STATES.includes(node.state) && !(node.state === 'busy' && node.retryAt !== null)
/** A revert with something still to do: to send, to hear about, a late run to wait for, a busy answer to try again. */
export const revertActive = (revert: RevertEntry | null): boolean =>
  revert !== null && (['pending', 'starting', 'running', 'waiting'].includes(revert.state) || (revert.state === 'busy' && revert.retryAt != null))

/** A rollout's state before anything happened: every node pending, in the order given. */
export function newRolloutState(settings: RolloutSettings, names: string[]): RolloutState {
  return {
    phase: 'survey',
    nodes: names.map((node) => ({
      node,
      state: 'pending',
      group: null,
      surveyed: false,
      before: null,
      pointerBefore: null,
      wanted: settings.ref,
      runId: null,
      release: null,
      dispatchedAt: null,
      finishedAt: null,
      durationMs: null,
      resources: null,
      noop: settings.noop,
      exitCode: null,
      message: null,
      busyTries: 0,
      retryAt: null,
      silent: 0,
      revert: null,
    })),
    groups: [],
    settledAt: [],
    rechecked: [],
    stopped: null,
    allowedFailures: 0,
    startedAt: null,
    finishedAt: null,
  }
}

/**
 * Derived from the state, never recorded: how many nodes are in each state, the nodes with
 * something going on (the only ones a decision looks at), each group's nodes not yet final,
 * and where each group's next pending node is. They keep every decision in proportion to the
 * nodes in flight, not to the fleet: a 10,000-node rollout is decided in well under a second.
 */
export class NodeIndex {
  private readonly counts = new Map<string, number>()
  readonly active = new Set<number>()
  private readonly indexed: Array<{state: string; revert: string; active: boolean; unfinished: boolean}> = []
  unfinished: number[] = []
  /** Grows whenever a node's state or revert state changes: part of the engine's signature. */
  moves = 0
  cursor: number[] = []

  constructor(private readonly state: RolloutState) {}

  count(key: string): number {
    return this.counts.get(key) ?? 0
  }

  private bump(key: string, by: number): void {
    this.counts.set(key, this.count(key) + by)
  }

  /** Brings the derived indexes up to date with node i. */
  reindex(i: number): void {
    const node = this.state.nodes[i]
    const next = {
      state: node.state,
      revert: node.revert?.state ?? '',
      active:
        node.state === 'starting' ||
        node.state === 'running' ||
        (node.state === 'busy' && node.retryAt !== null) ||
        revertActive(node.revert),
      unfinished: node.group !== null && !isFinal(node),
    }
    const old = this.indexed[i]
    if (!old || old.state !== next.state || old.revert !== next.revert) this.moves++
    if (old) {
      this.bump(`s:${old.state}`, -1)
      this.bump(`r:${old.revert}`, -1)
      if (old.unfinished) this.unfinished[node.group!]--
    }

    this.bump(`s:${next.state}`, 1)
    this.bump(`r:${next.revert}`, 1)
    if (next.unfinished) this.unfinished[node.group!]++
    if (next.active) this.active.add(i)
    else this.active.delete(i)
    this.indexed[i] = next
  }

  reindexAll(): void {
    this.counts.clear()
    this.active.clear()
    this.indexed.length = 0
    this.unfinished = this.state.groups.map(() => 0)
    this.cursor = this.state.groups.map(() => 0)
    for (let i = 0; i < this.state.nodes.length; i++) this.reindex(i)
  }

  /** The nodes with something going on, in name order. */
  activeNodes(): RolloutNode[] {
    return [...this.active].sort((a, b) => a - b).map((i) => this.state.nodes[i])
  }

  /** How many nodes are in a state that counts against the failure budget. */
  failures(): number {
    let count = 0
    for (const state of COUNTED_STATES) count += this.count(`s:${state}`)
    return count
  }
}
