/**
 * `npm run bench`: localpuppet's overhead as ratios against a baseline measured in the
 * same process, interleaved, so machine speed and load cancel out. Never run by `npm test`.
 *
 *   apply / puppet   localpuppet apply vs the same `puppet apply` command run directly, on
 *                    the demo release and (apply-real) on Debian's modules (delivery.ts);
 *                    apply-puppet8: the same on Debian 13's Puppet 8.10, in bin/debian13's chroot
 *   plan / node      localpuppet plan vs `node -e 0` (start-up dominates)
 *   plan keyed       plan-real: plan on Debian's modules installed as a tag, with the
 *                    verified files' stat keys vs `node -e 0` and vs reading every byte (plan.ts)
 *   pack / tar -czf, install / tar+sync, verify / sha256sum   on Debian's Puppet modules (at
 *                    BENCH_SCALES copies: 1, 4 and 16 by default),
 *                    a synthetic and a text-like release, with peak memory (delivery.ts)
 *
 *   detach / node    apply --detach returning (the run goes on) vs `node -e 0`
 *   skip / node      an --if-changed run that finds nothing changed vs `node -e 0`
 *   validate 50 / puppet strings, validate --compile 50 / 50 x puppet catalog compile
 *                    over Debian's puppet-module-* packages, and validate scaling: static
 *                    validate of 10, 100, 400 and 1,000 inputs against 10, and validate variables: one
 *                    class of 5,000, 20,000 and 80,000 assignments, and 2,500, 10,000 and 40,000
 *                    classes on one line, each size against the one before (test/bench/validate.ts)
 *
 *   fetch / curl+tar, warm fetch / curl index, fetch / r10k, fetch / g10k   see test/bench/fetch.ts
 *   incremental      the next release of a 3,864-file release on a node that has one (one line
 *                    changed, 10% of the files changed) vs r10k and g10k moving a Puppetfile, with
 *                    bytes downloaded, and a first fetch vs today's build (test/bench/incremental.ts)
 *   status / node    status, status --json and status --check over 100 run records
 *                    (test/bench/status.ts) vs `node -e 0`
 *   pack deb / dpkg-deb   pack --format deb vs dpkg-deb --build of the same tree (deb.ts)
 *   fleet            mco localpuppet apply vs mco rpc + a polling loop on 5 mcollectived,
 *                    the status summary with --nodes, and a real rollout's wall time over
 *                    the slowest run per batch on 5 and 20 nodes (test/bench/fleet.ts)
 *   ssh              a real rollout --via ssh's wall time over the slowest run per batch on
 *                    5 and 10 sshd on 127.0.0.1 (test/bench/ssh.ts)
 *   engine           the rollout engine's decisions for 10,000 simulated nodes
 *   layers           validate of 1,000 generated layered nodes, whole process (test/bench/layers.ts)
 *   pull             apply --fetch on a node following a channel (nothing changed) vs a
 *                    warm fetch, and fleet status --prometheus over 1,000 simulated nodes
 *                    vs curl of the same queries (test/bench/pull.ts)
 *   tick             apply --fetch --if-changed with nothing published, behind nginx, against
 *                    10,000 and 100,000 published nodes (BENCH_TICK_NODES) vs 1: conditional
 *                    (304) and whole, with nginx's bytes sent per tick, and publishing one
 *                    node's input into each, whole processes with farm-bench (test/bench/tick.ts)
 *
 * BENCH=apply, apply-puppet8, apply-real, plan-real, delivery, triggers, validate, validate-scaling, validate-variables, fetch, incremental, deb, status, fleet, ssh, engine, layers, pull or tick runs one
 * part; BENCH_SETS, BENCH_FILES and BENCH_FILE_KB choose and size the delivery data sets.
 */
import {execFileSync, spawnSync} from 'node:child_process'
import {mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {fileURLToPath} from 'node:url'

import {statusBench} from './status.js'
import {validateBench, validateScalingBench, validateVariablesBench} from './validate.js'
import {applyReal, delivery} from './delivery.js'

const REPO = fileURLToPath(new URL('../..', import.meta.url))
const BIN = join(REPO, 'bin', 'run.js')
const DEMO = join(REPO, 'fixtures', 'demo')
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 7)

function time(file: string, args: string[], env: NodeJS.ProcessEnv = {}, before?: () => void): number {
  before?.()
  const start = process.hrtime.bigint()
  const result = spawnSync(file, args, {stdio: 'ignore', env: {...process.env, ...env}})
  const ms = Number(process.hrtime.bigint() - start) / 1e6
  if (result.status !== 0 && result.status !== 2) throw new Error(`${file} ${args.join(' ')} exited ${result.status}`)
  return ms
}

/** Peak resident memory of a command, in MB (GNU time's %M). */
function peakMb(file: string, args: string[]): number {
  const result = spawnSync('/usr/bin/time', ['-f', '%M', file, ...args], {encoding: 'utf8', stdio: ['ignore', 'ignore', 'pipe']})
  if (result.status !== 0) throw new Error(`${file} ${args.join(' ')} exited ${result.status}: ${result.stderr}`)
  return Number(result.stderr.trim().split('\n').pop()) / 1024
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}

/** Runs a and b alternately, `rounds` times each, after one warm-up of each. */
function compare(name: string, target: number | null, a: () => number, b: () => number, rounds = ROUNDS) {
  a()
  b()
  const as: number[] = []
  const bs: number[] = []
  for (let i = 0; i < rounds; i++) {
    as.push(a())
    bs.push(b())
  }

  const ratio = median(as) / median(bs)
  const verdict = target === null ? 'no target set' : `target <= ${target}, ${ratio <= target ? 'ok' : 'OVER TARGET'}`
  console.log(`${name.padEnd(16)} ${median(as).toFixed(0).padStart(6)} ms / ${median(bs).toFixed(0).padStart(6)} ms = ${ratio.toFixed(2)}  (${verdict}; median of ${rounds} each)`)
  return ratio
}

function triggers(dir: string, isolate: string[]): void {
  const state = join(dir, 'triggers-state')
  const base = [BIN, 'apply', join(DEMO, 'input.yaml'), '--module-dir', join(DEMO, 'modules'), '--state-dir', state]
  const waitIdle = () => {
    spawnSync('node', [BIN, 'status', '--state-dir', state, '--wait', '--timeout', '120'], {stdio: 'ignore'})
  }

  // One real run first, so that --if-changed has a succeeded run to compare with.
  execFileSync('node', [...base, '--', ...isolate], {stdio: 'ignore'})
  compare('detach / node', null, () => time('node', [...base, '--detach', '--', ...isolate], {}, waitIdle), () => time('node', ['-e', '0']), Math.max(3, Math.floor(ROUNDS / 2)))
  waitIdle()
  compare('skip / node', null, () => time('node', [...base, '--if-changed', '--', ...isolate]), () => time('node', ['-e', '0']), Math.max(ROUNDS, 15))
}

/** BENCH=apply again, inside bin/debian13's chroot: Debian 13's Puppet 8.10 and Node 20.19 (root only). */
function applyOnPuppet8(): void {
  if (process.getuid?.() !== 0) {
    console.log('apply on Puppet 8: skipped (bin/debian13 needs root)')
    return
  }

  console.log("apply on Puppet 8: the apply bench in bin/debian13's Debian 13 chroot")
  const debian13 = join(REPO, 'bin', 'debian13')
  const built = spawnSync(debian13, ['build'], {stdio: ['ignore', 'inherit', 'inherit']})
  if (built.status !== 0) throw new Error(`bin/debian13 build exited ${built.status}`)
  const ran = spawnSync(debian13, ['run', 'node', '--import=tsx/esm', 'test/bench/bench.ts'], {stdio: ['ignore', 'inherit', 'inherit'], env: {...process.env, BENCH: 'apply', BENCH_ROUNDS: String(ROUNDS)}})
  if (ran.status !== 0) throw new Error(`the apply bench on Puppet 8 exited ${ran.status}`)
}

const dir = mkdtempSync(join(tmpdir(), 'localpuppet-bench-'))
try {
  const isolate = ['--confdir', join(dir, 'p/etc'), '--codedir', join(dir, 'p/code'), '--vardir', join(dir, 'p/var'), '--logdir', join(dir, 'p/log'), '--rundir', join(dir, 'p/run'), '--publicdir', join(dir, 'p/public')]
  const state = join(dir, 'state')
  const applyArgs = [BIN, 'apply', join(DEMO, 'input.yaml'), '--module-dir', join(DEMO, 'modules'), '--state-dir', state]
  const first = JSON.parse(execFileSync('node', [...applyArgs, '--json', '--', ...isolate], {encoding: 'utf8'}))
  // The baseline: the very command localpuppet ran, started directly.
  const [puppet, ...puppetArgs] = first.command as string[]

  console.log(`localpuppet bench (node ${process.version}, ${first.puppet?.implementation ?? 'unknown'} ${first.puppet?.version ?? ''} at ${first.puppet?.path ?? first.command[0]}, ${ROUNDS} rounds, interleaved)`)
  if (!process.env.BENCH || process.env.BENCH === 'apply') {
    compare('apply / puppet', 1.05, () => time('node', [...applyArgs, '--', ...isolate]), () => time(puppet, puppetArgs))
    const planArgs = [BIN, 'plan', join(DEMO, 'input.yaml'), '--module-dir', join(DEMO, 'modules'), '--state-dir', state, '--json']
    compare('plan / node', 2.5, () => time('node', planArgs), () => time('node', ['-e', '0']), Math.max(ROUNDS, 15))
  }

  if (!process.env.BENCH || process.env.BENCH === 'apply-puppet8') applyOnPuppet8()
  if (!process.env.BENCH || process.env.BENCH === 'triggers') triggers(dir, isolate)
  if (!process.env.BENCH || process.env.BENCH === 'validate' || process.env.BENCH === 'validate-scaling') validateScalingBench(dir, BIN)
  if (!process.env.BENCH || process.env.BENCH === 'validate') validateBench(dir, isolate, BIN, REPO)
  if (!process.env.BENCH || process.env.BENCH === 'validate' || process.env.BENCH === 'validate-variables') validateVariablesBench(dir, isolate, BIN)
  if (!process.env.BENCH || process.env.BENCH === 'delivery') delivery({bin: BIN, rounds: ROUNDS, time, peakMb, compare}, dir)
  if (!process.env.BENCH || process.env.BENCH === 'apply-real') applyReal({bin: BIN, rounds: ROUNDS, time, peakMb, compare}, dir, isolate)
  if (!process.env.BENCH || process.env.BENCH === 'plan-real') (await import('./plan.js')).planRealBench({bin: BIN, rounds: ROUNDS, time, peakMb, compare}, dir)
  if (!process.env.BENCH || process.env.BENCH === 'fetch') await (await import('./fetch.js')).fetchBench(dir, time, compare, Math.max(3, Math.floor(ROUNDS / 2)))
  if (!process.env.BENCH || process.env.BENCH === 'incremental') await (await import('./incremental.js')).incrementalBench(dir, time, compare, Math.max(3, Math.floor(ROUNDS / 2)))
  if (!process.env.BENCH || process.env.BENCH === 'status') statusBench(BIN, dir, ROUNDS)
  if (!process.env.BENCH || process.env.BENCH === 'deb') (await import('./deb.js')).debBench(dir, BIN, {time, compare, rounds: Math.max(3, Math.floor(ROUNDS / 2))})
  if (!process.env.BENCH || process.env.BENCH === 'engine') await (await import('./fleet.js')).engineBench()
  if (!process.env.BENCH || process.env.BENCH === 'fleet') await (await import('./fleet.js')).fleetBench()
  if (!process.env.BENCH || process.env.BENCH === 'ssh') await (await import('./ssh.js')).sshBench()
  if (!process.env.BENCH || process.env.BENCH === 'layers') (await import('./layers.js')).layersBench(dir, BIN)
  if (!process.env.BENCH || process.env.BENCH === 'tick') await (await import('./tick.js')).tickBench(dir, ROUNDS)
  if (!process.env.BENCH || process.env.BENCH === 'pull') await (await import('./pull.js')).pullBench(dir, {time, compare, peakMb, rounds: ROUNDS})
} finally {
  rmSync(dir, {recursive: true, force: true})
}
