import {expectedFleet} from '../../rollout/expected-fleet.js'
import {openRolloutsDir} from '../../rollout/record.js'
import {type TransportSpec, openTransport} from '../../rollout/transports/index.js'
import {type FleetStatus, fleetRow, summarizeFleet} from '../fleet-rows.js'

/** `fleet status --via mco` or `--via ssh`: the fleet the discovery finds (and found before: a node gone quiet is "no answer"), or the SSH targets. */
export async function fleetStatusViaMco(spec: TransportSpec, options: {stateDir: string; allowUntrusted?: boolean; signal?: AbortSignal}, warn: (line: string) => void): Promise<FleetStatus> {
  const {dir, untrusted} = await openRolloutsDir(options.stateDir, options.allowUntrusted, true)
  for (const problem of untrusted) warn(`--allow-untrusted: ${problem}`)
  // No run is started: -t is the time each node has to answer the status request.
  const transport = await openTransport(spec, {statusTimeout: spec.replyTimeout, warn})
  try {
    const fleet = await expectedFleet(transport, dir, {...options, warn})
    await fleet.remember()
    return summarizeFleet(
      fleet.expected.map((node) => fleetRow(node, fleet.answers[node])),
      fleet.expectedFrom,
    )
  } finally {
    await transport.close()
  }
}
