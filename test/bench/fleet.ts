/**
 * The fleet benchmark (`BENCH=fleet npm run bench`), on a real fleet of 5 mcollectived on
 * 127.0.0.1 (test/helpers/fleet.ts):
 *
 *   mco localpuppet apply / rpc + poll   `mco localpuppet apply` until its final table, vs the
 *        hand-written loop it replaces: `mco rpc localpuppet apply`, then
 *        `mco rpc localpuppet status` every 0.25 s until every node reports the run it
 *        started as final. Target: no slower (ratio <= 1).
 *   mco localpuppet status   the status summary of 5 nodes with --nodes discovery.
 *        Target: < 1.5 s.
 */
import {setTimeout as sleep} from 'node:timers/promises'

import {app, missingPackages, nodesFile, rpc, startFleet, stopFleet} from '../helpers/fleet.js'

const ROUNDS = Math.max(3, Math.floor(Number(process.env.BENCH_ROUNDS ?? 7) / 2))

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}

async function ms(work: () => Promise<void>): Promise<number> {
  const start = process.hrtime.bigint()
  await work()
  return Number(process.hrtime.bigint() - start) / 1e6
}

async function oneCommand(): Promise<void> {
  const result = await app(['apply', '--json'])
  if (result.exitCode !== 0) throw new Error(`mco localpuppet apply exited ${result.exitCode}: ${result.stdout}${result.stderr}`)
}

async function handWrittenLoop(): Promise<void> {
  const applied = await rpc('apply', [])
  const started = new Map(applied.replies.map((reply) => [reply.sender, reply.data.run_id as string]))
  if (applied.exitCode !== 0 || started.size !== 5) throw new Error(`mco rpc localpuppet apply: ${applied.stderr}`)
  for (;;) {
    await sleep(250)
    const status = await rpc('status', [])
    const final = status.replies.filter((reply) => reply.data.run_id === started.get(reply.sender) && reply.data.state !== 'running')
    if (final.length === started.size) return
  }
}

export async function fleetBench(): Promise<void> {
  const unavailable = await missingPackages()
  if (unavailable) {
    console.log(`fleet: skipped (${unavailable})`)
    return
  }

  await startFleet(
    [1, 2, 3, 4, 5].map((i) => [`web${i}`, 'web', 8080 + i] as const),
    60 * 60_000,
  )
  try {
    await oneCommand()
    await handWrittenLoop()
    const ours: number[] = []
    const theirs: number[] = []
    for (let i = 0; i < ROUNDS; i++) {
      ours.push(await ms(oneCommand))
      theirs.push(await ms(handWrittenLoop))
    }

    const ratio = median(ours) / median(theirs)
    console.log(
      `${'mco localpuppet apply / rpc + poll'.padEnd(16)} ${median(ours).toFixed(0)} ms / ${median(theirs).toFixed(0)} ms = ${ratio.toFixed(2)}  (5 nodes; target <= 1.0, ${ratio <= 1 ? 'ok' : 'OVER TARGET'}; median of ${ROUNDS} each)`,
    )
    // The status summary against the bare request it makes (`mco rpc localpuppet status`),
    // interleaved: on a loaded machine Ruby's and Node's start-up dominate both.
    const status: number[] = []
    const bare: number[] = []
    for (let i = 0; i < 7; i++) {
      status.push(
        await ms(async () => {
          const result = await app(['status', '--json', '--nodes', nodesFile()])
          if (result.exitCode !== 0) throw new Error(`mco localpuppet status exited ${result.exitCode}: ${result.stdout}${result.stderr}`)
        }),
      )
      bare.push(
        await ms(async () => {
          const result = await rpc('status', ['--nodes', nodesFile()])
          if (result.replies.length !== 5) throw new Error(`mco rpc localpuppet status: ${result.stderr}`)
        }),
      )
    }

    const summary = median(status)
    console.log(
      `${'mco localpuppet status --nodes'.padEnd(16)} ${summary.toFixed(0)} ms  (5 nodes; target < 1500 ms, ${summary < 1500 ? 'ok' : 'OVER TARGET'}; median of 7; mco rpc localpuppet status --nodes: ${median(bare).toFixed(0)} ms)`,
    )
  } finally {
    await stopFleet()
  }
}
