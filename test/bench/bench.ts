/**
 * `npm run bench`: localpuppet's overhead as ratios against a baseline measured in the
 * same process, interleaved, so machine speed and load cancel out. Never run by `npm test`.
 *
 *   apply / puppet   localpuppet apply vs the same `puppet apply` command run directly
 *   plan / node      localpuppet plan vs `node -e 0` (start-up dominates)
 *   pack / tar -czf, install / tar -xzf, verify / sha256sum   on a synthetic release of
 *                    10,000 files (~200 MB), with the peak memory of pack and install
 *
 *   detach / node    apply --detach returning (the run goes on) vs `node -e 0`
 *   skip / node      an --if-changed run that finds nothing changed vs `node -e 0`
 *   validate 50 / 50 x parser validate   validate of 50 inputs against one release vs
 *                    50 runs of `puppet parser validate` on one file (the one-pass design)
 *
 *   fetch / curl+tar, fetch / r10k, fetch / g10k   see test/bench/fetch.ts
 *   fleet            mco localpuppet apply vs mco rpc + a polling loop on 5 mcollectived,
 *                    and the status summary with --nodes (test/bench/fleet.ts)
 *
 * BENCH=apply, delivery, triggers, validate, fetch or fleet runs one part; BENCH_FILES and
 * BENCH_FILE_KB size the synthetic release.
 */
import {execFileSync, spawnSync} from 'node:child_process'
import {mkdirSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {fileURLToPath} from 'node:url'

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

/** A release of `count` files of `kb` KiB each: pseudo-random hex text, compressible about 2:1 like source code. */
function syntheticRelease(root: string, count: number, kb: number): void {
  let x = 0x9e3779b9
  const line = Buffer.alloc(kb * 1024)
  for (let i = 0; i < count; i++) {
    const dir = join(root, `mod${Math.floor(i / 100)}`, 'files')
    if (i % 100 === 0) mkdirSync(dir, {recursive: true})
    for (let j = 0; j < line.length; j++) {
      x ^= x << 13
      x ^= x >>> 17
      x ^= x << 5
      line[j] = j % 64 === 63 ? 10 : 48 + ((x >>> 0) % 16)
    }

    writeFileSync(join(dir, `f${i}.txt`), line)
  }

  writeFileSync(join(root, 'manifest.yaml'), 'modulepath: []\n')
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

function validateBench(dir: string, isolate: string[]): void {
  const inputs = join(dir, 'validate-inputs')
  mkdirSync(inputs, {recursive: true})
  for (let i = 0; i < 50; i++) writeFileSync(join(inputs, `node${i}.yaml`), `app: foo@^1.4\nclasses:\n  foo:\n    port: ${8000 + i}\n  platform:\n`)
  const one = join(DEMO, 'modules', 'foo', 'tags', '1.4.0', 'foo', 'manifests', 'init.pp')
  const validate = time('node', [BIN, 'validate', inputs, '--module-dir', join(DEMO, 'modules'), '--', ...isolate])
  let fifty = 0
  for (let i = 0; i < 50; i++) fifty += time('puppet', ['parser', 'validate', one, ...isolate])
  const ratio = validate / fifty
  console.log(`${'validate 50 / 50 x parser validate'.padEnd(16)} ${validate.toFixed(0)} ms / ${fifty.toFixed(0)} ms = ${ratio.toFixed(3)}  (one pass over 50 inputs against one puppet start per file)`)
}

function delivery(dir: string): void {
  const files = Number(process.env.BENCH_FILES ?? 10_000)
  const kb = Number(process.env.BENCH_FILE_KB ?? 20)
  const modules = join(dir, 'delivery', 'modules')
  syntheticRelease(join(modules, 'bench', 'tags', '1.0.0'), files, kb)
  const archive = join(dir, 'delivery', 'bench.tar.gz')
  const plain = join(dir, 'delivery', 'plain.tar.gz')
  const rounds = Math.max(3, Math.floor(ROUNDS / 2))
  console.log(`delivery: ${files} files x ${kb} KiB (${((files * kb) / 1024).toFixed(0)} MB), median of ${rounds}`)
  compare(
    'pack / tar -czf',
    1.3,
    () => time('node', [BIN, 'pack', 'bench/tags/1.0.0', '--module-dir', modules, '-o', archive], {}, () => rmSync(archive, {force: true})),
    () => time('tar', ['-czf', plain, '-C', modules, 'bench/tags/1.0.0']),
    rounds,
  )
  const target = join(dir, 'delivery', 'installed')
  const untarred = join(dir, 'delivery', 'untarred')
  const fresh = (path: string) => () => {
    rmSync(path, {recursive: true, force: true})
    mkdirSync(path, {recursive: true})
  }

  compare(
    'install / tar -xzf',
    1.5,
    () => time('node', [BIN, 'install', archive, '--module-dir', target], {}, fresh(target)),
    () => time('tar', ['-xzf', archive, '-C', untarred], {}, fresh(untarred)),
    rounds,
  )
  compare(
    'verify / sha256sum',
    1.2,
    () => time('node', [BIN, 'verify', '--module-dir', target]),
    () => time('sh', ['-c', `find '${join(target, 'bench')}' -type f -print0 | xargs -0 sha256sum > /dev/null`]),
    rounds,
  )
  fresh(target)()
  const packMb = peakMb('node', [BIN, 'pack', 'bench/tags/1.0.0', '--module-dir', modules, '-o', join(dir, 'delivery', 'mem.tar.gz')])
  const installMb = peakMb('node', [BIN, 'install', archive, '--module-dir', target])
  console.log(`peak memory      pack ${packMb.toFixed(0)} MB, install ${installMb.toFixed(0)} MB  (target < 200 MB each, ${packMb < 200 && installMb < 200 ? 'ok' : 'OVER TARGET'})`)
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
  if (!process.env.BENCH || process.env.BENCH === 'apply') {
    compare('apply / puppet', 1.1, () => time('node', [...applyArgs, '--', ...isolate]), () => time(puppet, puppetArgs))
    const planArgs = [BIN, 'plan', join(DEMO, 'input.yaml'), '--module-dir', join(DEMO, 'modules'), '--state-dir', state, '--json']
    compare('plan / node', 2.5, () => time('node', planArgs), () => time('node', ['-e', '0']), Math.max(ROUNDS, 15))
  }

  if (!process.env.BENCH || process.env.BENCH === 'triggers') triggers(dir, isolate)
  if (!process.env.BENCH || process.env.BENCH === 'validate') validateBench(dir, isolate)
  if (!process.env.BENCH || process.env.BENCH === 'delivery') delivery(dir)
  if (!process.env.BENCH || process.env.BENCH === 'fetch') await (await import('./fetch.js')).fetchBench(dir, time, compare, Math.max(3, Math.floor(ROUNDS / 2)))
  if (!process.env.BENCH || process.env.BENCH === 'fleet') await (await import('./fleet.js')).fleetBench()
} finally {
  rmSync(dir, {recursive: true, force: true})
}
