/**
 * validate against Puppet's own tools, over Debian's puppet-module-* packages (real code;
 * bin/setup installs the ones the tests use, and every installed one is taken here):
 *
 *   validate 50 / puppet strings        `localpuppet validate` of 50 inputs (static checks and
 *                                        one Puppet syntax check) against `puppet strings
 *                                        generate` of the same modules (what a tool that
 *                                        wanted classes and parameters from Puppet would run)
 *   validate --compile 50 / 50 x compile `localpuppet validate --compile` of 50 inputs (one
 *                                        Puppet start) against 50 runs of `puppet catalog
 *                                        compile` of the same ENC documents, facts and modules
 *                                        (target <= 0.2)
 *
 *   validate scaling                    static `validate --puppet none` of 10, 100, 400 and
 *                                        1,000 inputs over the same release, installed (so
 *                                        its record is verified too), interleaved: each
 *                                        count's time against 10 inputs' (100/10, 400/10 with the
 *                                        target <= 3 of issue 25, 1,000/10), the time each input
 *                                        adds, and peak RSS. BENCH=validate-scaling runs only this.
 *
 *   validate variables                  static `validate` (with Puppet's syntax check and the
 *                                        variable check) of one input whose class has 5,000,
 *                                        20,000 and 80,000 assignments, and of 2,500, 10,000 and
 *                                        40,000 classes on one line (issue 33), interleaved:
 *                                        each size's time against the one before it (linear is
 *                                        ~4 per 4x), and the time per 1,000 past the smallest
 *                                        (Puppet's start-up taken out).
 *                                        BENCH=validate-variables runs only this.
 *
 * BENCH_VALIDATE_INPUTS changes the 50; BENCH_ROUNDS/4 rounds each (at least one): these are slow.
 */
import {spawnSync} from 'node:child_process'
import {chmodSync, existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'

import {assignmentsClass, oneLineClasses} from '../helpers/puppet-code.js'
import {realRelease} from './delivery.js'

const DEBIAN = '/usr/share/puppet/modules'

/** Classes of Debian's modules that compile with the Debian 12 fact set, with per-node parameters. */
const CLASSES: Array<(i: number) => Record<string, unknown>> = [
  (i) => ({ntp: {servers: [`ntp${i}.example.com`]}}),
  () => ({systemd: null}),
  () => ({apt: {stage: 'main'}}),
  (i) => ({'mysql::server': {root_password: `secret${i}`}}),
  () => ({rsync: null}),
  () => ({xinetd: null}),
  () => ({postfix: null}),
  () => ({redis: null}),
  () => ({chrony: null}),
  () => ({'sysctl::base': null}),
  () => ({'mongodb::server': null}),
  () => ({rabbitmq: null}),
  () => ({tftp: null}),
  () => ({zookeeper: null}),
  () => ({collectd: null}),
]

interface Timed {
  ms: number
  /** CPU time (user + system) of the process and every child it waited for: fair when other work loads the machine. */
  cpuMs: number
  /** Peak resident memory of the largest process (GNU time's %M), in MB. */
  peakMb: number
  status: number | null
}

let timeFile = ''

function run(file: string, args: string[], cwd?: string): Timed {
  const start = process.hrtime.bigint()
  const result = spawnSync('/usr/bin/time', ['-f', '%U %S %M', '-o', timeFile, file, ...args], {stdio: 'ignore', cwd})
  const ms = Number(process.hrtime.bigint() - start) / 1e6
  const [user, system, kb] = readFileSync(timeFile, 'utf8').trim().split('\n').pop()!.split(' ').map(Number)
  return {ms, cpuMs: (user + system) * 1000, peakMb: kb / 1024, status: result.status}
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}

function report(name: string, target: number | null, a: Timed[], b: Timed[], note: string): void {
  const wall = median(a.map((x) => x.ms)) / median(b.map((x) => x.ms))
  const cpu = median(a.map((x) => x.cpuMs)) / median(b.map((x) => x.cpuMs))
  const verdict = target === null ? 'no target set' : `target <= ${target}, ${wall <= target ? 'ok' : 'OVER TARGET'}`
  console.log(
    `${name}: ${median(a.map((x) => x.ms)).toFixed(0)} ms / ${median(b.map((x) => x.ms)).toFixed(0)} ms = ${wall.toFixed(3)} wall, ` +
      `${median(a.map((x) => x.cpuMs)).toFixed(0)} / ${median(b.map((x) => x.cpuMs)).toFixed(0)} ms = ${cpu.toFixed(3)} CPU  (${verdict}; ${note}, median of ${a.length})`,
  )
}

function sum(runs: Timed[]): Timed {
  return {ms: runs.reduce((t, r) => t + r.ms, 0), cpuMs: runs.reduce((t, r) => t + r.cpuMs, 0), peakMb: Math.max(...runs.map((r) => r.peakMb)), status: runs.every((r) => r.status === 0) ? 0 : 1}
}

/** `count` clean inputs in `dir`, each naming two classes of Debian's modules with per-node parameters. */
function writeInputs(dir: string, count: number): Array<Record<string, unknown>> {
  mkdirSync(dir, {recursive: true})
  const documents: Array<Record<string, unknown>> = []
  for (let i = 0; i < count; i++) {
    const classes = {...CLASSES[i % CLASSES.length](i), ...CLASSES[(i + 7) % CLASSES.length](i)}
    documents.push(classes)
    writeFileSync(join(dir, `node${i}.yaml`), `app: debian/tags/1.0.0\nclasses: ${JSON.stringify(classes)}\n`)
  }

  return documents
}

/**
 * `node args(count)` for each count, `rounds` times, interleaved round by round, after one
 * run of each that must exit 0 (what is timed must be the work, not a refusal): the median
 * wall and CPU time and the peak memory of each count.
 */
function interleaved(name: string, what: string, counts: number[], rounds: number, args: (count: number) => string[]): {ms: (count: number) => number; cpu: (count: number) => number; peak: (count: number) => number} {
  for (const count of counts) {
    const check = spawnSync('node', args(count), {encoding: 'utf8'})
    if (check.status !== 0) throw new Error(`${name}: ${count} ${what} are not clean (exit ${check.status}):\n${(check.stdout + check.stderr).slice(0, 2000)}`)
  }

  const runs = new Map<number, Timed[]>(counts.map((count) => [count, []]))
  for (let round = 0; round < rounds; round++) for (const count of counts) runs.get(count)!.push(run('node', args(count)))
  return {
    ms: (count) => median(runs.get(count)!.map((r) => r.ms)),
    cpu: (count) => median(runs.get(count)!.map((r) => r.cpuMs)),
    peak: (count) => Math.max(...runs.get(count)!.map((r) => r.peakMb)),
  }
}

/**
 * Static validate (`--puppet none`) of 10, 100, 400 and 1,000 inputs over Debian's modules
 * in one installed release (pack, then install: its record is verified too), interleaved round by round: what each count costs against 10 inputs, the
 * time each further input adds, and peak RSS. The target (issue 25) is 400 / 10 <= 3: a
 * release is read once per call, each input then costs little; 1,000 / 10 is shown against
 * the same bound, which it should meet too when per-input work is small.
 */
export function validateScalingBench(dir: string, bin: string): void {
  if (readdirSync(DEBIAN).length === 0) {
    console.log('validate scaling skipped: no puppet-module-* packages under /usr/share/puppet/modules (run bin/setup)')
    return
  }

  const counts = [10, 100, 400, 1000]
  const rounds = Math.max(3, Math.floor(Number(process.env.BENCH_ROUNDS ?? 7) / 2))
  const root = join(dir, 'validate-scaling')
  timeFile = join(dir, 'validate-scaling-time.txt')
  // Installed as a node (or CI) holds it: packed and installed, so every input's release is
  // also verified against its install record, as validate does for a recorded tag.
  realRelease(join(root, 'source', 'debian', 'tags', '1.0.0'))
  const archive = join(root, 'debian.tar.gz')
  mkdirSync(join(root, 'modules'))
  for (const step of [['pack', 'debian/tags/1.0.0', '--module-dir', join(root, 'source'), '-o', archive], ['install', archive, '--module-dir', join(root, 'modules')]]) {
    const done = spawnSync('node', [bin, ...step], {encoding: 'utf8'})
    if (done.status !== 0) throw new Error(`validate scaling: ${step[0]} exited ${done.status}: ${done.stderr}`)
  }
  for (const count of counts) writeInputs(join(root, `inputs-${count}`), count)
  const {ms, cpu, peak} = interleaved('validate scaling', 'inputs', counts, rounds, (count) => [bin, 'validate', join(root, `inputs-${count}`), '--module-dir', join(root, 'modules'), '--puppet', 'none'])
  console.log(`validate scaling: static validate (--puppet none) over ${readdirSync(DEBIAN).length} Debian modules in one installed release, median of ${rounds}, interleaved`)
  for (const count of counts) {
    const ratio = ms(count) / ms(10)
    const target = count === 10 ? '' : `, ${count}/10 = ${ratio.toFixed(2)} wall, ${(cpu(count) / cpu(10)).toFixed(2)} CPU${count >= 400 ? ` (target <= 3, ${ratio <= 3 ? 'ok' : 'OVER TARGET'})` : ''}`
    console.log(`  ${String(count).padStart(5)} inputs: ${ms(count).toFixed(0).padStart(6)} ms, ${(ms(count) / count).toFixed(1)} ms per input, peak ${peak(count).toFixed(0)} MB${target}`)
  }

  console.log(`  each input past 10 adds ${((ms(1000) - ms(10)) / 990).toFixed(2)} ms (wall), ${((cpu(1000) - cpu(10)) / 990).toFixed(2)} ms (CPU)`)
}

/** A shape of generated code validate must check in linear time: its module's init.pp for a count, and the input's classes. */
interface Shape {
  name: string
  /** What the count counts. */
  unit: string
  counts: number[]
  module: string
  code: (count: number) => string
  classes: string
}

/**
 * Static validate of one input on generated code of growing size (issue 33), whole
 * processes, Puppet's syntax check and the variable check included, interleaved round by
 * round: each size against the one before (4x the size: at most ~4 when linear, Puppet's
 * start-up included; ~16 when quadratic), and what each 1,000 add. The shapes: one class of
 * 5,000, 20,000 and 80,000 assignments, each reading the one before (the variable check
 * looked names up in a list: 20,000 took 9 s of CPU, 40,000 took 37 s); 2,500, 10,000 and
 * 40,000 classes on one line (Puppet's locator counted each class's column from the start
 * of that line).
 */
export function validateVariablesBench(dir: string, isolate: string[], bin: string): void {
  const shapes: Shape[] = [
    {name: 'one class of N assignments', unit: 'assignments', counts: [5000, 20_000, 80_000], module: 'big', code: (count) => assignmentsClass('big', count), classes: '[big]'},
    {name: 'N classes on one line', unit: 'classes', counts: [2500, 10_000, 40_000], module: 'many', code: (count) => oneLineClasses(count).code, classes: '[many]'},
  ]
  const rounds = Math.max(3, Math.floor(Number(process.env.BENCH_ROUNDS ?? 7) / 2))
  timeFile = join(dir, 'validate-variables-time.txt')
  for (const [index, shape] of shapes.entries()) {
    const root = join(dir, `validate-variables-${index}`)
    const bytes = new Map<number, number>()
    for (const count of shape.counts) {
      const manifests = join(root, `modules-${count}`, shape.module, 'trunk', shape.module, 'manifests')
      mkdirSync(manifests, {recursive: true})
      const code = shape.code(count)
      bytes.set(count, Buffer.byteLength(code))
      writeFileSync(join(manifests, 'init.pp'), code)
      writeFileSync(join(root, `input-${count}.yaml`), `app: ${shape.module}/trunk\nclasses: ${shape.classes}\n`)
    }

    const {ms, cpu} = interleaved('validate variables', shape.unit, shape.counts, rounds, (count) => [bin, 'validate', join(root, `input-${count}.yaml`), '--module-dir', join(root, `modules-${count}`), '--', ...isolate])
    console.log(`validate variables: static validate (syntax and variable check) of ${shape.name}, median of ${rounds}, interleaved`)
    for (const [at, count] of shape.counts.entries()) {
      const before = shape.counts[at - 1]
      const ratio = before === undefined ? '' : `, ${count / 1000}k/${before / 1000}k = ${(ms(count) / ms(before)).toFixed(2)} wall, ${(cpu(count) / cpu(before)).toFixed(2)} CPU (linear: 4 at most, Puppet's start-up included; quadratic: ~16)`
      console.log(`  ${String(count).padStart(6)} ${shape.unit} (${(bytes.get(count)! / 1e6).toFixed(2)} MB): ${ms(count).toFixed(0).padStart(7)} ms, ${cpu(count).toFixed(0).padStart(7)} ms CPU${ratio}`)
    }

    const [small, , large] = shape.counts
    console.log(`  each 1,000 ${shape.unit} past ${small / 1000}k add ${((ms(large) - ms(small)) / ((large - small) / 1000)).toFixed(1)} ms (wall), ${((cpu(large) - cpu(small)) / ((large - small) / 1000)).toFixed(1)} ms (CPU)`)
  }
}

/** Runs the two validate benchmarks; `bin` is bin/run.js, `isolate` keeps Puppet's state in `dir`. */
export function validateBench(dir: string, isolate: string[], bin: string, repo: string): void {
  const modules = readdirSync(DEBIAN)
  if (modules.length === 0) {
    console.log('validate         skipped: no puppet-module-* packages under /usr/share/puppet/modules (run bin/setup)')
    return
  }

  const count = Number(process.env.BENCH_VALIDATE_INPUTS ?? 50)
  const rounds = Math.max(1, Math.floor(Number(process.env.BENCH_ROUNDS ?? 7) / 4))
  const root = join(dir, 'validate')
  timeFile = join(dir, 'validate-time.txt')
  const release = join(root, 'modules', 'debian', 'tags', '1.0.0')
  // A copy (Debian's module directories are links to /etc/alternatives, and a release may
  // hold no link: a release of links is refused, and validate would time only that).
  realRelease(release)
  const inputs = join(root, 'inputs')
  const documents = writeInputs(inputs, count)

  console.log(`validate: ${count} inputs over ${modules.length} Debian modules, ${rounds} round(s) each`)
  // What is timed must be the work, not a refusal: the inputs are chosen to be clean.
  const check = spawnSync('node', [bin, 'validate', inputs, '--module-dir', join(root, 'modules'), '--puppet', 'none'], {encoding: 'utf8'})
  if (check.status !== 0) throw new Error(`validate bench: the inputs are not clean (exit ${check.status}):\n${(check.stdout + check.stderr).slice(0, 2000)}`)
  // Static: localpuppet validate (its default: static checks and the syntax check in one Puppet process) vs puppet strings.
  const strings = join(root, 'strings')
  mkdirSync(strings)
  const pattern = `${release}/*/manifests/**/*.pp`
  const staticRuns: Timed[] = []
  const noSyntaxRuns: Timed[] = []
  const stringsRuns: Timed[] = []
  for (let round = 0; round < rounds; round++) {
    staticRuns.push(run('node', [bin, 'validate', inputs, '--module-dir', join(root, 'modules'), '--', ...isolate]))
    noSyntaxRuns.push(run('node', [bin, 'validate', inputs, '--module-dir', join(root, 'modules'), '--puppet', 'none']))
    const generated = run('puppet', ['strings', 'generate', '--format', 'json', '--out', join(strings, 'out.json'), pattern], strings)
    if (generated.status !== 0) throw new Error(`puppet strings generate exited ${generated.status}`)
    stringsRuns.push(generated)
  }

  report(`validate ${count} / puppet strings`, null, staticRuns, stringsRuns, 'the default static pass, with the syntax check of every manifest in one Puppet process')
  report(`validate --puppet none ${count} / puppet strings`, null, noSyntaxRuns, stringsRuns, 'the static checks without the syntax check')

  // Compile: one localpuppet validate --compile against one puppet catalog compile per input,
  // with the same ENC document, the same fact set (Puppet's yaml facts terminus) and modulepath.
  const facts = join(repo, 'fixtures', 'rules', 'facts', 'debian12.json')
  const node = 'bench-node'
  const yamldir = join(root, 'yaml')
  mkdirSync(join(yamldir, 'facts'), {recursive: true})
  const values = JSON.parse(readFileSync(facts, 'utf8'))
  writeFileSync(join(yamldir, 'facts', `${node}.yaml`), `--- !ruby/object:Puppet::Node::Facts\nname: ${node}\nvalues: ${JSON.stringify(values)}\n`)
  mkdirSync(join(root, 'environments', 'production'), {recursive: true})
  const scripts = documents.map((classes, i) => {
    const enc = join(root, `enc${i}.yaml`)
    writeFileSync(enc, JSON.stringify({classes, parameters: {localpuppet_release: 'debian/tags/1.0.0', localpuppet_run_id: '<run-id>'}}))
    const script = join(root, `enc${i}.sh`)
    writeFileSync(script, `#!/bin/sh\nexec cat '${enc}'\n`)
    chmodSync(script, 0o755)
    return script
  })
  const compileRuns: Timed[] = []
  const puppetRuns: Timed[] = []
  let failed = 0
  for (let round = 0; round < rounds; round++) {
    compileRuns.push(run('node', [bin, 'validate', inputs, '--module-dir', join(root, 'modules'), '--compile', '--facts', facts, '--', ...isolate]))
    const each: Timed[] = []
    for (const script of scripts) {
      const result = run('puppet', [
        'catalog', 'compile', node, ...isolate, '--yamldir', yamldir, '--facts_terminus', 'yaml', '--node_terminus', 'exec', '--external_nodes', script,
        '--modulepath', release, '--environmentpath', join(root, 'environments'), '--environment', 'production', '--render-as', 'json',
      ])
      if (result.status !== 0) failed++
      each.push(result)
    }

    puppetRuns.push(sum(each))
  }

  const notCompiled = compileRuns.filter((run) => run.status !== 0).length
  if (notCompiled > 0) throw new Error(`validate bench: validate --compile exited non-zero in ${notCompiled} of ${rounds} round(s)`)
  report(`validate --compile ${count} / ${count} x puppet catalog compile`, 0.2, compileRuns, puppetRuns, `${failed} of ${count * rounds} puppet catalog compile runs failed`)
  if (!existsSync(join(strings, 'out.json'))) throw new Error('puppet strings wrote nothing')
}
