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
 *   rollout / slowest run per batch   `localpuppet rollout --batch N` on 5 and 20 nodes: the
 *        rollout's wall time over the sum, batch by batch, of the slowest node's own run
 *        (its run record's duration). Target: <= 1.3.
 *   engine   the rollout engine's decisions (handle + next) for 10,000 simulated nodes, in
 *        batches and in a window (`BENCH=engine`). Target: < 1 s each.
 */
import {setTimeout as sleep} from 'node:timers/promises'

import {driveRollout} from '../../src/lib/rollout/drive.js'
import {RolloutEngine} from '../../src/lib/rollout/engine.js'
import {parseBatch, rolloutSettings} from '../../src/lib/rollout/settings.js'
import {app, missingPackages, nodesFile, operator, rpc, startFleet, stopFleet} from '../helpers/fleet.js'
import {type Behaviour, SimulatedFleet, VirtualClock} from '../helpers/simulated-fleet.js'

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

/** The engine alone: 10,000 simulated nodes (1 % misbehaving), its own time only (the simulated fleet's is not counted). */
export async function engineBench(): Promise<void> {
  const odd: Behaviour[] = ['fail', 'refuse', 'busy-once', 'busy-always', 'silent', 'hang', 'vanish', 'sours']
  for (const [label, flags] of [
    ['batches 1,5,25%,100%', {batch: '1,5,25%,100%'}],
    ['batches of 10%, soak', {batch: '10%', soak: '5m'}],
    ['window 100', {window: 100}],
    ['window 10', {window: 10}],
  ] as const) {
    const specs = Array.from({length: 10_000}, (_, i) => ({name: `n${String(i).padStart(5, '0')}`, behaviour: (i % 97 === 0 ? odd[i % odd.length] : 'succeed') as Behaviour, runMs: 1000 + ((i * 37) % 60_000), before: 'app/tags/1.0.0'}))
    const settings = {...rolloutSettings({ref: 'app/tags/1.1.0', canary: 1, 'max-failures': '5%', deadline: '2m', ...flags}), batch: 'batch' in flags ? parseBatch(flags.batch) : [{percent: 100}]}
    const clock = new VirtualClock()
    const engine = new RolloutEngine(settings, specs.map((spec) => spec.name))
    let spent = 0
    let events = 0
    for (const method of ['handle', 'next'] as const) {
      const original = engine[method].bind(engine) as (...args: unknown[]) => unknown
      ;(engine as unknown as Record<string, unknown>)[method] = (...args: unknown[]) => {
        const start = performance.now()
        try {
          return original(...args)
        } finally {
          spent += performance.now() - start
        }
      }
    }

    const wall = performance.now()
    await driveRollout(engine, new SimulatedFleet(specs, clock), clock, {record: async () => void events++})
    const total = performance.now() - wall
    console.log(`${`engine, ${label}`.padEnd(32)} ${spent.toFixed(0).padStart(5)} ms deciding, ${total.toFixed(0)} ms with the simulated fleet; ${events} events recorded (10,000 nodes; target < 1000 ms, ${spent < 1000 ? 'ok' : 'OVER TARGET'})`)
  }
}

/**
 * A real rollout: its wall time over the sum of each batch's slowest run (the runs' own
 * durations, from their records). `rollout`: the operator's command with these arguments
 * (MCollective's by default; the SSH bench gives its own).
 */
export async function rolloutOverhead(count: number, batch: number, rollout = (args: string[]) => operator([...args, '--nodes', nodesFile()]), label = ''): Promise<void> {
  const ratios: number[] = []
  const walls: number[] = []
  for (let i = 0; i < ROUNDS; i++) {
    let answer: {exitCode: number; stdout: string; stderr: string; json: any} | undefined
    const wall = await ms(async () => {
      answer = await rollout(['rollout', '--batch', String(batch), '--json'])
    })
    if (answer?.exitCode !== 0) throw new Error(`rollout exited ${answer?.exitCode}: ${answer?.stdout}${answer?.stderr}`)
    const nodes = answer.json.nodes as Array<{durationMs: number}>
    let ideal = 0
    for (let at = 0; at < nodes.length; at += batch) ideal += Math.max(...nodes.slice(at, at + batch).map((node) => node.durationMs))
    ratios.push(wall / ideal)
    walls.push(wall)
  }

  const ratio = median(ratios)
  console.log(`${`rollout${label} ${count} nodes --batch ${batch} / slowest run per batch`.padEnd(32)} ${median(walls).toFixed(0)} ms; ratio ${ratio.toFixed(2)}  (target <= 1.3, ${ratio <= 1.3 ? 'ok' : 'OVER TARGET'}; median of ${ROUNDS})`)
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
    await rolloutOverhead(5, 2)
  } finally {
    await stopFleet()
  }

  // Twenty nodes, where memory allows (each mcollectived is a Ruby process of ~60 MB).
  const {freemem} = await import('node:os')
  if (freemem() < 4 * 1024 ** 3) {
    console.log('rollout 20 nodes: skipped (less than 4 GiB free)')
    return
  }

  await startFleet(
    Array.from({length: 20}, (_, i) => [`node${String(i + 1).padStart(2, '0')}`, i % 2 ? 'web' : 'db', 8100 + i] as const),
    60 * 60_000,
  )
  try {
    await operator(['rollout', '--nodes', nodesFile(), '--json'])
    await rolloutOverhead(20, 5)
  } finally {
    await stopFleet()
  }
}
