import type {RolloutEngine, RolloutEvent} from './engine.js'
import type {RolloutTransport} from './transports/transport.js'

export type {RolloutTransport} from './transports/transport.js'

export interface Clock {
  now(): number
  sleep(ms: number, signal?: AbortSignal): Promise<void>
}

export interface DriveOptions {
  signal?: AbortSignal
  /** Called with every event that changed the rollout, before anything else is sent: the record is written here. */
  record(event: RolloutEvent): Promise<void>
  /** After every event, for a progress display. */
  progress?(engine: RolloutEngine): void
}

/**
 * Carries out the engine's actions until it is done (or the signal stops it: then what was
 * sent is recorded and the rollout can be resumed). A start is recorded as dispatched
 * before it is sent, so that a rollout killed while waiting for the answer knows to ask
 * the node about it rather than start it twice.
 */
export async function driveRollout(engine: RolloutEngine, transport: RolloutTransport, clock: Clock, options: DriveOptions): Promise<'done' | 'interrupted'> {
  const {signal} = options
  const take = async (event: RolloutEvent): Promise<void> => {
    const kept = engine.handle(event)
    if (kept) await options.record(kept)
    options.progress?.(engine)
  }

  // One action at a time, the next decided afresh from the state its answer left: so that
  // a rollout resumed from its record takes exactly the steps it would have taken.
  for (;;) {
    if (signal?.aborted) return 'interrupted'
    if (engine.done) return 'done'
    const [action] = engine.next(clock.now())
    try {
      const outcome = await perform(action)
      if (outcome) return outcome
    } catch (error) {
      // Stopped while a call was out: what was dispatched is recorded, and a resume asks the nodes.
      if (signal?.aborted) return 'interrupted'
      throw error
    }
  }

  async function perform(action: ReturnType<RolloutEngine['next']>[number]): Promise<'done' | 'interrupted' | undefined> {
    {
      switch (action.kind) {
        case 'done': {
          return 'done'
        }

        case 'survey': {
          const answers = await transport.survey(action.nodes, signal)
          await take({kind: 'surveyed', at: clock.now(), answers})
          break
        }

        case 'adopt': {
          const answers = await transport.survey(action.nodes, signal)
          await take({kind: 'adopted', at: clock.now(), nodes: action.nodes, answers})
          break
        }

        case 'probe': {
          const answers = await transport.probe(action.nodes, signal)
          await take({kind: 'probed', at: clock.now(), nodes: action.nodes, answers})
          break
        }

        case 'verify': {
          const answers = await transport.survey(action.nodes, signal)
          await take({kind: 'verified', at: clock.now(), nodes: action.nodes, answers})
          break
        }

        case 'recheck': {
          const answers = action.nodes.length > 0 ? await transport.survey(action.nodes, signal) : {}
          await take({kind: 'rechecked', at: clock.now(), group: action.group, nodes: action.nodes, answers})
          break
        }

        case 'start': {
          await take({kind: 'dispatched', at: clock.now(), purpose: 'apply', nodes: action.nodes})
          if (signal?.aborted) return 'interrupted'
          const answers = await transport.start(action.nodes, engine.settings, signal)
          await take({kind: 'started', at: clock.now(), purpose: 'apply', nodes: action.nodes, answers})
          break
        }

        case 'revert': {
          const nodes = action.nodes.map((entry) => entry.node)
          await take({kind: 'dispatched', at: clock.now(), purpose: 'revert', nodes})
          if (signal?.aborted) return 'interrupted'
          const answers = await transport.revert(action.nodes, engine.settings, signal)
          await take({kind: 'started', at: clock.now(), purpose: 'revert', nodes, answers})
          break
        }

        case 'poll': {
          const answers = await transport.poll(action.runs, action.waitMs, signal)
          await take({kind: 'polled', at: clock.now(), nodes: action.runs.map((run) => run.node), answers})
          break
        }

        case 'wait': {
          await clock.sleep(Math.max(0, action.until - clock.now()), signal)
          if (!signal?.aborted) await take({kind: 'tick', at: clock.now()})
          break
        }
      }
    }

    return undefined
  }
}

/** Replays a record's events into a fresh engine: the state the rollout had when the record was last written. */
export function replayEvents(engine: RolloutEngine, events: RolloutEvent[]): void {
  for (const event of events) engine.handle(event)
}
