import type {FleetTransport} from './transport.js'
import type {McoSpec} from './mco.js'
import type {SshSpec} from './ssh.js'

/*
 * The registry of fleet transports, and the only place one is named. Adding a transport is a
 * file in this folder that implements FleetTransport and exports its spec type (a `via` and
 * what --resume needs to reach the same nodes the same way), a member of TransportSpec, a
 * name in TRANSPORTS and a case in openTransport; plus its flags in cli/fleet-flags.ts.
 */

/** How a rollout reaches its nodes, recorded so that --resume reaches the same ones the same way. */
export type TransportSpec = McoSpec | SshSpec

/** The transports' names, for --via. */
export const TRANSPORTS = ['mco', 'ssh'] as const satisfies ReadonlyArray<TransportSpec['via']>

/** What a caller may set beyond the spec: the time a node has to answer a status request (fleet status -t). */
export interface TransportUse {
  statusTimeout?: number | null
  /** Told what a person should know that is not an answer (ssh refusing a node's host key). */
  warn?: (line: string) => void
}

/** The transport a spec names; it is loaded only when used. */
export async function openTransport(spec: TransportSpec, use: TransportUse = {}): Promise<FleetTransport> {
  switch (spec.via) {
    case 'mco': {
      const {McoTransport, mcoOptions} = await import('./mco.js')
      return new McoTransport({...mcoOptions(spec), statusTimeout: use.statusTimeout})
    }

    case 'ssh': {
      const {SshTransport} = await import('./ssh.js')
      return new SshTransport({...spec, statusTimeout: use.statusTimeout ?? spec.statusTimeout}, use.warn)
    }
  }
}

export type {FleetTransport, RolloutTransport} from './transport.js'
