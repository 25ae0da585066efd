import type {NodeReport, RunReport, StartAnswer} from '../engine.js'
import type {RolloutSettings} from '../settings.js'

/**
 * How localpuppet reaches a fleet: finding it, asking each node how it is, starting runs and
 * reverts, and following them. Each call answers for the nodes that answered; a node missing
 * from the answer did not answer. A call that cannot be made at all (the broker is down)
 * throws FleetUnavailableError (69). One file per transport in this folder implements it;
 * index.ts opens one from its spec.
 */
export interface FleetTransport {
  /** The nodes the operator's filters find, with how each is. */
  discover(signal?: AbortSignal): Promise<Record<string, NodeReport>>
  /** How each node is: its pointer, applied release and newest attempt. */
  survey(nodes: string[], signal?: AbortSignal): Promise<Record<string, NodeReport>>
  /** The same question, with a short reply timeout (seconds, not a whole -t): for nodes the survey found silent. */
  probe(nodes: string[], signal?: AbortSignal): Promise<Record<string, NodeReport>>
  /** Starts the rollout's run (apply of the settings' ref, or of each node's input) on each node. */
  start(nodes: string[], settings: RolloutSettings, signal?: AbortSignal): Promise<Record<string, StartAnswer>>
  /** Starts `rollback --to RELEASE` on each node (with --save where asked). */
  revert(nodes: Array<{node: string; release: string; save: boolean}>, settings: RolloutSettings, signal?: AbortSignal): Promise<Record<string, StartAnswer>>
  /** How each of these runs is; a node answers once its run is final or after waitMs. */
  poll(runs: Array<{node: string; runId: string}>, waitMs: number, signal?: AbortSignal): Promise<Record<string, RunReport>>
  /** Lets go of what it holds (temporary files, connections). */
  close(): Promise<void>
  /** What names "the same filters" in the fleet memory: the fleet found before under this key is expected again. */
  readonly fleetKey: string
  /** A file that names the fleet exactly (one node per line), or null when discovery decides. */
  readonly nodesFile: string | null
  /**
   * Nodes the operator named one by one (mco -I NAME): expected even when silent. `only`: the
   * filters are those names and nothing else, so the fleet is exactly them.
   */
  readonly named?: {nodes: string[]; only: boolean}
  /** A fleet given as a list (SSH's --targets, --nodes, --inventory): exactly these nodes, and where the list came from. */
  readonly listed?: {nodes: string[]; from: string}
}

/** A node name a transport may report that is safe in a nodes file and a `runs=` argument. */
export const NODE_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,252}$/

/** What a rollout needs of a fleet once it knows its nodes (a simulated fleet in tests has only this). */
export type RolloutTransport = Pick<FleetTransport, 'survey' | 'probe' | 'start' | 'revert' | 'poll'>
