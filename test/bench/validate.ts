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
 * BENCH_VALIDATE_INPUTS changes the 50; BENCH_ROUNDS/4 rounds each (at least one): these are slow.
 */
import {spawnSync} from 'node:child_process'
import {chmodSync, existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'

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
  status: number | null
}

let timeFile = ''

function run(file: string, args: string[], cwd?: string): Timed {
  const start = process.hrtime.bigint()
  const result = spawnSync('/usr/bin/time', ['-f', '%U %S', '-o', timeFile, file, ...args], {stdio: 'ignore', cwd})
  const ms = Number(process.hrtime.bigint() - start) / 1e6
  const [user, system] = readFileSync(timeFile, 'utf8').trim().split('\n').pop()!.split(' ').map(Number)
  return {ms, cpuMs: (user + system) * 1000, status: result.status}
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
  return {ms: runs.reduce((t, r) => t + r.ms, 0), cpuMs: runs.reduce((t, r) => t + r.cpuMs, 0), status: runs.every((r) => r.status === 0) ? 0 : 1}
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
  mkdirSync(inputs)
  const documents: Array<Record<string, unknown>> = []
  for (let i = 0; i < count; i++) {
    const classes = {...CLASSES[i % CLASSES.length](i), ...CLASSES[(i + 7) % CLASSES.length](i)}
    documents.push(classes)
    writeFileSync(join(inputs, `node${i}.yaml`), `app: debian/tags/1.0.0\nclasses: ${JSON.stringify(classes)}\n`)
  }

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
