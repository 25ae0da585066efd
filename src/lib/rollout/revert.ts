import {LockHeldError, StillRunningError} from '../errors.js'
import {compareNatural} from '../util/natural-order.js'
import {RolloutEngine} from './engine.js'
import {type NodeClaim, claimNodes} from './exclusion.js'
import {type RolloutRecord, RolloutStore, openRolloutsDir, readRolloutRecord} from './record.js'
import {appliedByNode, recordAsSeen} from './record-view.js'
import {RollbackStarts} from './revert-transport.js'
import {type RolloutIo, type RolloutOptions, type RolloutResult, drive, systemClock} from './rollout.js'
import {rolloutSettings} from './settings.js'
import {openTransport} from './transports/index.js'

/*
 * `rollout revert ID`: puts back what a rollout changed. Each node the rollout moved (its
 * applied release is no longer the one it had before) goes back to that release with
 * `rollback --to`, as the rollout's own revert does, in a rollout of its own: groups,
 * failure budget, deadlines, a record, --resume.
 */

export interface RevertPlan {
  /** One rollout per release to go back to (nearly always one), in natural order. */
  groups: Array<{release: string; nodes: string[]}>
  /** The rollout moved pointers (--save): they go back too. */
  save: boolean
  /** Nodes it moved that cannot be put back, and why. */
  skipped: Array<{node: string; why: string}>
}

/** The revert flags a rollout's own flags share. */
export type RevertFlags = Omit<Parameters<typeof rolloutSettings>[0], 'ref' | 'save' | 'noop' | 'fetch' | 'revert' | 'only-outdated'>

export interface RevertResult {
  reverts: string
  plan: RevertPlan
  rollouts: RolloutResult[]
  /** 0 when every node the rollout moved is back; 1 otherwise; a rollout's own 130/143 when interrupted. */
  exitCode: number
}

/** Which nodes a rollout moved, and where each goes back to. */
export function planRevert(record: RolloutRecord): RevertPlan {
  const applied = appliedByNode(record)
  const groups = new Map<string, string[]>()
  const skipped: RevertPlan['skipped'] = []
  for (const node of record.state.nodes) {
    if ((applied.get(node.node) ?? null) === node.before) continue
    if (node.before === null) {
      skipped.push({node: node.node, why: `no release succeeded on it before rollout ${record.id}: nothing to go back to`})
      continue
    }

    groups.set(node.before, [...(groups.get(node.before) ?? []), node.node])
  }

  return {
    groups: [...groups].sort(([a], [b]) => compareNatural(a, b)).map(([release, nodes]) => ({release, nodes})),
    save: record.settings.save,
    skipped,
  }
}

/**
 * Reverts rollout `id`. Refused while it is still driven (73) or while runs it started are
 * going (75: resume it first, so that what they did is known). A group that does not
 * entirely succeed stops the groups after it.
 */
export async function revertRollout(id: string, flags: RevertFlags, options: RolloutOptions, io: RolloutIo): Promise<RevertResult> {
  const {dir, untrusted} = await openRolloutsDir(options.stateDir, options.allowUntrusted)
  for (const problem of untrusted) io.warn(`--allow-untrusted: ${problem}`)
  const record = recordAsSeen(await readRolloutRecord(dir, id, options.allowUntrusted))
  if (record.status === 'running') throw new LockHeldError(`rollout ${id} is still being driven by process ${record.pid}: stop it first, or wait for it`, {pid: record.pid, runId: null})
  const going = record.state.nodes.filter((node) => ['starting', 'running'].includes(node.state) || ['starting', 'running', 'pending'].includes(node.revert?.state ?? ''))
  if (going.length > 0) {
    throw new StillRunningError(`rollout ${id} has runs going (${going.map((node) => node.node).join(', ')}): localpuppet rollout --resume ${id} first, so that what they did is known`)
  }

  const plan = planRevert(record)
  const rollouts: RolloutResult[] = []
  for (const group of plan.groups) {
    const settings = rolloutSettings({...flags, ref: group.release, save: plan.save, revert: 'none'})
    const fleet = await openTransport(record.transport, {warn: io.warn})
    const transport = new RollbackStarts(fleet)
    let claim: NodeClaim | undefined
    try {
      const engine = new RolloutEngine(settings, group.nodes)
      const store = RolloutStore.create(dir, {transport: record.transport, settings, expected: group.nodes, expectedFrom: `the nodes rollout ${id} moved off ${group.release}`, reverts: id}, engine)
      // A revert is a rollout: a node another live rollout drives is refused (73), as rollout refuses it.
      claim = await claimNodes(dir, store.record.id, group.nodes, options.allowUntrusted)
      const clock = options.clock ?? systemClock
      const surveyed = engine.handle({kind: 'surveyed', at: clock.now(), answers: await transport.survey(group.nodes, options.signal)})
      if (surveyed) await store.add(surveyed, engine)
      const result = await drive(engine, store, transport, clock, options, io)
      rollouts.push(result)
      if (result.exitCode !== 0) break
    } finally {
      await claim?.release()
      await fleet.close()
    }
  }

  const failed = rollouts.find((result) => result.exitCode !== 0)
  return {reverts: id, plan, rollouts, exitCode: failed ? failed.exitCode : rollouts.length < plan.groups.length || plan.skipped.length > 0 ? 1 : 0}
}
