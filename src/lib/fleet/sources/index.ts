import type {PuppetDbConfig} from '../../puppetdb/client.js'
import type {TransportSpec} from '../../rollout/transports/index.js'
import type {WantedIndexOptions} from '../../source/wanted-now.js'
import type {FleetStatus} from '../fleet-rows.js'
import type {McoProbe} from '../fleet-source.js'

/*
 * The registry of fleet sources for `fleet status`, and the only place one is named. Adding a
 * source is a file in this folder, a member of FleetSourceSpec and a case in fleetStatus; plus
 * its flags in commands/fleet/status.ts (and cli/fleet-flags.ts fleetSourceSpec). Each case is
 * loaded only when used: --via mco does not load the Prometheus client.
 */

/** Where fleet status reads the fleet from, as its flags say. */
export type FleetSourceSpec =
  | {via: 'mco'; transport: TransportSpec; probe?: McoProbe}
  | {via: 'prometheus'; url: string; lookbackMs?: number; deadlineMs?: number; channel?: string; wanted: WantedIndexOptions}
  | {via: 'puppetdb'; puppetdb: PuppetDbConfig; lookbackMs?: number; deadlineMs?: number; channel?: string; wanted: WantedIndexOptions}

export interface FleetStatusOptions {
  stateDir: string
  allowUntrusted?: boolean
  signal?: AbortSignal
}

/** The fleet as its source sees it: a row per node, then counts by applied release and state. */
export async function fleetStatus(spec: FleetSourceSpec, options: FleetStatusOptions, warn: (line: string) => void): Promise<FleetStatus> {
  switch (spec.via) {
    case 'mco': {
      // Named no way to the fleet: MCollective, the default, is checked in seconds before anything else.
      if (spec.probe) await (await import('../fleet-source.js')).assertMcoReachable(spec.probe)
      const {fleetStatusViaMco} = await import('./mco.js')
      return fleetStatusViaMco(spec.transport, options, warn)
    }

    case 'prometheus': {
      const [{fleetStatusViaPrometheus}, {readWantedIndex}] = await Promise.all([import('./prometheus.js'), import('../../source/wanted-now.js')])
      const wanted = await readWantedIndex(spec.wanted)
      for (const line of wanted?.warnings ?? []) warn(line)
      return fleetStatusViaPrometheus(spec.url, {lookbackMs: spec.lookbackMs, deadlineMs: spec.deadlineMs, channel: spec.channel, wanted})
    }

    case 'puppetdb': {
      const [{fleetStatusViaPuppetDb}, {readWantedIndex}] = await Promise.all([import('./puppetdb.js'), import('../../source/wanted-now.js')])
      const wanted = await readWantedIndex(spec.wanted)
      for (const line of wanted?.warnings ?? []) warn(line)
      return fleetStatusViaPuppetDb(spec.puppetdb, {lookbackMs: spec.lookbackMs, deadlineMs: spec.deadlineMs, channel: spec.channel, wanted})
    }
  }
}

export type {FleetRow, FleetStatus} from '../fleet-rows.js'
