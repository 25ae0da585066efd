import {terminalText} from '../util/terminal-text.js'

/**
 * One node, one row: what a fleet view does when a node's name and its scrape targets do
 * not match one to one. Prometheus keys a node's series by scrape target (job and
 * instance), the node names itself in a label; the two part ways when a node moves to
 * another target (its old series linger for the lookback) or when several nodes' metrics
 * files sit behind one node exporter (their series collide: the exporter serves one).
 */

/** What a fleet view needs of a node row to tell which of its targets is the freshest. */
export interface SeenNode {
  node: string
  instance: string
  /** Its series are gone from Prometheus. */
  stopped: boolean
  /** Its newest attempt (ISO), null when not reported. */
  at: string | null
  alsoSeenAs?: string[]
}

/** The most node names kept per scrape target for the collision note: the note names a few, then counts. */
const MAX_NAMES = 5

/** The node names one target's desired-release series gave: the first MAX_NAMES, and how many in all. */
export interface TargetNames {
  names: Set<string>
  more: number
}

/** Records that a target's series named `node` (bounded: past MAX_NAMES, only counted). */
export function noteName(names: Map<string, TargetNames>, target: string, node: string | undefined): void {
  if (node === undefined || node === '') return
  const known = names.get(target) ?? {names: new Set<string>(), more: 0}
  names.set(target, known)
  if (known.names.has(node)) return
  if (known.names.size < MAX_NAMES) known.names.add(node)
  else known.more++
}

/**
 * Why one target's series cannot be believed when they name more than one node, in one
 * line that names them and says what to check; undefined when they name one.
 */
export function collision(seen: TargetNames | undefined, instance: string): string | undefined {
  if (seen === undefined || seen.names.size < 2) return undefined
  const named = [...seen.names].map((name) => terminalText(name, 100)).join(', ')
  const count = seen.names.size + seen.more
  return `the metrics of ${count} nodes (${named}${seen.more > 0 ? ', ...' : ''}) collide behind one scrape target ${terminalText(instance, 200)}: their .prom files share one node exporter's textfile directory? Give each node its own node exporter (docs/fleet-pull.md)`
}

const time = (iso: string | null) => {
  const ms = iso === null ? Number.NaN : Date.parse(iso)
  return Number.isFinite(ms) ? ms : Number.NEGATIVE_INFINITY
}

/**
 * One row per node name: of several targets that reported one name, a reporting one before a
 * stopped one, then the newest attempt; the others are not counted (their targets are kept
 * in the winner's `alsoSeenAs`, for a note). A node moved to another scrape target is then
 * one node, never a second "web1" that stopped reporting. Two targets reporting one name at
 * once are two machines calling themselves one node: the winner gets `liveTwins` (those
 * targets), and a fleet view believes nothing of it (one of them may be failing unseen).
 * A stopped target that followed something else than the winner (`sameFollow` false: another
 * channel) is kept as its own row: else a machine taking a stopped node's name on another
 * channel would take that node out of its channel's promotion gate.
 */
export function freshestPerNode<T extends SeenNode>(nodes: T[], sameFollow: (a: T, b: T) => boolean = () => true): Array<T & {liveTwins?: string[]}> {
  const byName = new Map<string, T[]>()
  for (const node of nodes) {
    const group = byName.get(node.node)
    if (group) group.push(node)
    else byName.set(node.node, [node])
  }

  const rows: Array<T & {liveTwins?: string[]}> = []
  for (let group of byName.values()) {
    // The freshest, with the others merged in; the stopped ones following something else are the next round's.
    while (group.length > 0) {
      const winner = group.reduce((held, node) => (held.stopped !== node.stopped ? (node.stopped ? held : node) : time(node.at) > time(held.at) ? node : held))
      const apart = (node: T) => node.stopped && !sameFollow(winner, node)
      const others = group.filter((node) => node !== winner && !apart(node))
      const live = winner.stopped ? [] : others.filter((node) => !node.stopped).map((node) => node.instance)
      rows.push(others.length === 0 ? winner : {...winner, alsoSeenAs: others.map((node) => node.instance), ...(live.length > 0 ? {liveTwins: live} : {})})
      group = group.filter((node) => node !== winner && apart(node))
    }
  }

  return rows
}

/** Why a node reported by several live scrape targets at once is not believed, in one line naming them. */
export function twinsConflict(node: string, instance: string, twins: string[]): string {
  const targets = [instance, ...twins].map((target) => terminalText(target, 200)).join(', ')
  return `node ${terminalText(node, 100)} is reported by ${twins.length + 1} live scrape targets at once (${targets}): two machines with one node_name? Nothing it reports is believed until one is renamed or stops`
}
