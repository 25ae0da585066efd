/**
 * The tick benchmark (BENCH=tick; issue 40): a node's timer tick where nothing was
 * published, `apply --fetch --if-changed` on a node whose input comes from the repository
 * (fake Puppet: the run is skipped), against a repository of 1 and of 10,000 published
 * node inputs (BENCH_TICK_NODES) behind Debian's nginx (gzip on, as a server offering it
 * would be), whole processes:
 *
 *   tick N / tick 1         the conditional tick (the kept index asked about: a 304) at N
 *                           nodes vs at 1
 *   full tick N / tick 1    the same with the kept copy removed before each run: the index
 *                           read whole (gzipped), as every tick read it before issue 40
 *
 * and each tick's bytes as nginx sent them ($bytes_sent: headers and bodies). The large
 * repository is generated: one real publish (the release, node web1), then the other
 * nodes' entries added to its index and the index signed again, as publish would write
 * them (their input files are not written: no tick reads them).
 */
import {execFileSync, spawnSync} from 'node:child_process'
import {mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {fileURLToPath} from 'node:url'

import {loadSigningKey, signIndex} from '../../src/lib/archive/signature.js'
import {inputPathFor, parseRepositoryIndex, serializeRepositoryIndex} from '../../src/lib/repository/repository-index.js'
import {startNginx} from '../helpers/nginx.js'

const BIN = fileURLToPath(new URL('../../bin/run.js', import.meta.url))
const DEMO = fileURLToPath(new URL('../../fixtures/demo/modules', import.meta.url))
const FAKE_PUPPET = fileURLToPath(new URL('../../fixtures/fake-puppet/puppet', import.meta.url))

const run = (args: string[], env: NodeJS.ProcessEnv = {}) => execFileSync('node', [BIN, ...args], {stdio: ['ignore', 'ignore', 'pipe'], env: {...process.env, ...env}})

/** A repository of foo 1.4.0 and `nodes` node inputs (web1 real, the others generated), and a node web1 that ran once from it. */
async function tickNode(work: string, nodes: number) {
  mkdirSync(work, {recursive: true})
  const key = join(work, 'key.pem')
  execFileSync('openssl', ['genpkey', '-algorithm', 'ed25519', '-out', key])
  execFileSync('openssl', ['pkey', '-in', key, '-pubout', '-out', join(work, 'key.pub.pem')])
  const archive = join(work, 'foo.tar.gz')
  run(['pack', 'foo/tags/1.4.0', '--module-dir', DEMO, '-o', archive, '--sign', key])
  const repo = join(work, 'repo')
  run(['publish', archive, '--repo', repo, '--sign', key])
  writeFileSync(join(work, 'web1.yaml'), 'app: foo/tags/1.4.0\n')
  run(['publish', '--node', 'web1', '--input', join(work, 'web1.yaml'), '--repo', repo, '--sign', key])
  if (nodes > 1) {
    const index = parseRepositoryIndex(readFileSync(join(repo, 'index.json')), 'index.json')
    const web1 = index.nodes!.web1
    for (let i = 2; i <= nodes; i++) {
      const sha256 = (i.toString(16).padStart(8, '0') + web1.sha256).slice(0, 64)
      index.nodes![`node${i}.dc1.example.com`] = {...web1, input: inputPathFor(`node${i}.dc1.example.com`, sha256), sha256}
    }

    const bytes = serializeRepositoryIndex(index)
    writeFileSync(join(repo, 'index.json.sig'), signIndex(bytes, await loadSigningKey(key)))
    writeFileSync(join(repo, 'index.json'), bytes)
  }

  const nginx = await startNginx(repo, join(work, 'nginx'), {requestLog: true, gzip: true})
  const node = join(work, 'node')
  for (const sub of ['modules', 'state', 'etc', 'fake']) mkdirSync(join(node, sub), {recursive: true})
  const config = join(node, 'etc', 'config.yaml')
  writeFileSync(config, [`source: ${nginx.url}`, `trust: ${join(work, 'key.pub.pem')}`, 'input_from: repository', 'node_name: web1', `input: ${join(node, 'input.yaml')}`, `module_dir: ${join(node, 'modules')}`, `state_dir: ${join(node, 'state')}`, `puppet: ${FAKE_PUPPET}`, ''].join('\n'))
  const env = {LOCALPUPPET_CONFIG: config, FAKE_PUPPET_DIR: join(node, 'fake'), FAKE_PUPPET_SLEEP: '0'}
  run(['apply', '--fetch'], env)
  const log = join(work, 'nginx', 'access.log')
  const kept = join(node, 'modules', '.localpuppet')
  const tick = () => spawnSync('node', [BIN, 'apply', '--fetch', '--if-changed'], {stdio: 'ignore', env: {...process.env, ...env}}).status
  /** One tick's requests as nginx logged them, and the bytes it sent. */
  const measure = (full: boolean) => {
    if (full) for (const name of readdirSync(kept).filter((n) => n.startsWith('kept-index-'))) rmSync(join(kept, name))
    const before = readFileSync(log, 'utf8').length
    const status = tick()
    const lines = readFileSync(log, 'utf8').slice(before).trim().split('\n')
    return {status, requests: lines.map((line) => line.split(' ').slice(1, 3).join(' ')), bytes: lines.reduce((sum, line) => sum + Number(line.split(' ')[3]), 0)}
  }

  const indexBytes = readFileSync(join(repo, 'index.json')).length
  return {env, kept, indexBytes, measure, stop: () => nginx.stop()}
}

/** farm-bench's paired whole-process timing of a shell command line against another. */
function farmBench(a: string, b: string, rounds: number): void {
  const result = spawnSync('farm-bench', ['-n', String(rounds), '--timeout', '600', '--vs', `sh -c '${b}'`, '--', 'sh', '-c', a], {encoding: 'utf8'})
  if (result.error) throw new Error(`farm-bench: ${result.error.message} (BENCH=tick times whole processes with farm-bench)`)
  console.log(result.stdout.trim())
  if (result.status !== 0) console.log(result.stderr.trim())
}

export async function tickBench(dir: string, rounds: number): Promise<void> {
  const many = Number(process.env.BENCH_TICK_NODES ?? 10_000)
  const small = await tickNode(join(dir, 'tick-1'), 1)
  const large = await tickNode(join(dir, `tick-${many}`), many)
  try {
    for (const [label, node] of [['1 node', small], [`${many} nodes`, large]] as const) {
      const full = node.measure(true)
      const conditional = node.measure(false)
      console.log(`tick (${label}; index.json ${node.indexBytes} bytes): conditional ${conditional.bytes} bytes [${conditional.requests.join(', ')}] exit ${conditional.status}; without the kept copy ${full.bytes} bytes [${full.requests.join(', ')}] exit ${full.status}`)
    }

    const command = (node: typeof small, full: boolean) =>
      `${full ? `rm -f ${node.kept}/kept-index-*; ` : ''}LOCALPUPPET_CONFIG=${node.env.LOCALPUPPET_CONFIG} FAKE_PUPPET_DIR=${node.env.FAKE_PUPPET_DIR} FAKE_PUPPET_SLEEP=0 exec node ${BIN} apply --fetch --if-changed >/dev/null 2>&1`
    console.log(`tick ${many} / tick 1 (conditional, both):`)
    farmBench(command(large, false), command(small, false), rounds)
    console.log(`full tick ${many} (kept copy removed) / tick 1 (conditional):`)
    farmBench(command(large, true), command(small, false), rounds)
  } finally {
    await small.stop()
    await large.stop()
  }
}
