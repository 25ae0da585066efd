/**
 * `npm run bench`: localpuppet's overhead as ratios against a baseline measured in the
 * same process, interleaved, so machine speed and load cancel out. Never run by `npm test`.
 *
 *   apply / puppet   localpuppet apply vs the same `puppet apply` command run directly
 *   plan / node      localpuppet plan vs `node -e 0` (start-up dominates)
 */
import {execFileSync, spawnSync} from 'node:child_process'
import {mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {fileURLToPath} from 'node:url'

const REPO = fileURLToPath(new URL('../..', import.meta.url))
const BIN = join(REPO, 'bin', 'run.js')
const DEMO = join(REPO, 'fixtures', 'demo')
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 7)

function time(file: string, args: string[], env: NodeJS.ProcessEnv = {}): number {
  const start = process.hrtime.bigint()
  const result = spawnSync(file, args, {stdio: 'ignore', env: {...process.env, ...env}})
  const ms = Number(process.hrtime.bigint() - start) / 1e6
  if (result.status !== 0 && result.status !== 2) throw new Error(`${file} ${args.join(' ')} exited ${result.status}`)
  return ms
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}

/** Runs a and b alternately, `rounds` times each, after one warm-up of each. */
function compare(name: string, target: number, a: () => number, b: () => number, rounds = ROUNDS) {
  a()
  b()
  const as: number[] = []
  const bs: number[] = []
  for (let i = 0; i < rounds; i++) {
    as.push(a())
    bs.push(b())
  }

  const ratio = median(as) / median(bs)
  const verdict = ratio <= target ? 'ok' : 'OVER TARGET'
  console.log(`${name.padEnd(16)} ${median(as).toFixed(0).padStart(6)} ms / ${median(bs).toFixed(0).padStart(6)} ms = ${ratio.toFixed(2)}  (target <= ${target}, ${verdict}; median of ${rounds} each)`)
  return ratio
}

const dir = mkdtempSync(join(tmpdir(), 'localpuppet-bench-'))
try {
  const isolate = ['--confdir', join(dir, 'p/etc'), '--codedir', join(dir, 'p/code'), '--vardir', join(dir, 'p/var'), '--logdir', join(dir, 'p/log'), '--rundir', join(dir, 'p/run'), '--publicdir', join(dir, 'p/public')]
  const state = join(dir, 'state')
  const applyArgs = [BIN, 'apply', join(DEMO, 'input.yaml'), '--module-dir', join(DEMO, 'modules'), '--state-dir', state]
  const first = JSON.parse(execFileSync('node', [...applyArgs, '--json', '--', ...isolate], {encoding: 'utf8'}))
  // The baseline: the very command localpuppet ran, started directly.
  const [puppet, ...puppetArgs] = first.command as string[]

  console.log(`localpuppet bench (node ${process.version}, ${ROUNDS} rounds, interleaved)`)
  compare('apply / puppet', 1.1, () => time('node', [...applyArgs, '--', ...isolate]), () => time(puppet, puppetArgs))
  const planArgs = [BIN, 'plan', join(DEMO, 'input.yaml'), '--module-dir', join(DEMO, 'modules'), '--state-dir', state, '--json']
  compare('plan / node', 2.5, () => time('node', planArgs), () => time('node', ['-e', '0']), Math.max(ROUNDS, 15))
} finally {
  rmSync(dir, {recursive: true, force: true})
}
