/**
 * The SSH fleet benchmark (`BENCH=ssh npm run bench`), on real sshd on 127.0.0.1
 * (test/helpers/ssh-fleet.ts): `localpuppet rollout --via ssh --batch 2` on 5 and 10
 * nodes, each node's own input (its release already applied once, so what is measured is
 * the rollout, not a first verification of the release): the rollout's wall time over the
 * sum, batch by batch, of the slowest node's own run. Target: <= 1.3, as over MCollective.
 */
import {writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import {base, missingPackages, nodes, operator, sshFlags, startSshFleet, stopSshFleet} from '../helpers/ssh-fleet.js'
import {rolloutOverhead} from './fleet.js'

export async function sshBench(): Promise<void> {
  const unavailable = await missingPackages()
  if (unavailable) {
    console.log(`ssh: skipped (${unavailable})`)
    return
  }

  await startSshFleet(
    Array.from({length: 10}, (_, i) => [`node${String(i + 1).padStart(2, '0')}`, 'web', 8100 + i] as const),
    60 * 60_000,
  )
  try {
    for (const count of [5, 10]) {
      const inventory = join(base, `inventory-${count}.yaml`)
      await writeFile(inventory, ['nodes:', ...nodes.slice(0, count).map((entry) => `  ${entry.name}: {host: 127.0.0.1, port: ${entry.sshPort}}`), ''].join('\n'))
      const rollout = (args: string[]) => operator([...args, ...sshFlags(), '--inventory', inventory])
      // Each node's release applied once first.
      const first = await rollout(['rollout', '--json'])
      if (first.exitCode !== 0) throw new Error(`rollout --via ssh exited ${first.exitCode}: ${first.stdout}${first.stderr}`)
      await rolloutOverhead(count, 2, rollout, ' --via ssh')
    }
  } finally {
    await stopSshFleet()
  }
}
