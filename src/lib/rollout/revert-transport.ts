import type {RolloutTransport} from './drive.js'
import type {NodeReport, RunReport, StartAnswer} from './engine.js'
import type {RolloutSettings} from './settings.js'

/**
 * A transport whose starts are `rollback --to REF` (with --save when the settings save):
 * what `rollout revert` drives, so that each node goes back to exactly the release it had,
 * replaying its own earlier run, with the whole rollout machinery (groups, budget,
 * deadlines, record, --resume) around it. Everything else is the transport it wraps.
 */
export class RollbackStarts implements RolloutTransport {
  constructor(readonly inner: RolloutTransport) {}

  survey(nodes: string[], signal?: AbortSignal): Promise<Record<string, NodeReport>> {
    return this.inner.survey(nodes, signal)
  }

  probe(nodes: string[], signal?: AbortSignal): Promise<Record<string, NodeReport>> {
    return this.inner.probe(nodes, signal)
  }

  start(nodes: string[], settings: RolloutSettings, signal?: AbortSignal): Promise<Record<string, StartAnswer>> {
    if (settings.ref === null) throw new Error('a revert rollout has no release to go back to (a bug)')
    return this.inner.revert(nodes.map((node) => ({node, release: settings.ref!, save: settings.save})), settings, signal)
  }

  revert(nodes: Array<{node: string; release: string; save: boolean}>, settings: RolloutSettings, signal?: AbortSignal): Promise<Record<string, StartAnswer>> {
    return this.inner.revert(nodes, settings, signal)
  }

  poll(runs: Array<{node: string; runId: string}>, waitMs: number, signal?: AbortSignal): Promise<Record<string, RunReport>> {
    return this.inner.poll(runs, waitMs, signal)
  }
}
