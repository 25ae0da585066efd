/**
 * The tick benchmark (BENCH=tick; issue 40): a node's timer tick where nothing was
 * published, `apply --fetch --if-changed` on a node whose input comes from the repository
 * (fake Puppet: the run is skipped), against repositories of 1 node and of each size in
 * BENCH_TICK_NODES (default 10000,100000) behind Debian's nginx (gzip on, as a server
 * offering it would be), whole processes:
 *
 *   tick N / tick 1         the conditional tick (the kept index or document asked about: a
 *                           304) at N nodes vs at 1
 *   full tick N / tick 1    the same with the kept copies removed before each run: read
 *                           whole (gzipped), as every tick read the index before issue 40
 *   publish one / N         `publish --node web1 --input F` into the N-node repository (its
 *                           input changed each time), whole process; issue 40's target <= 1 s
 *
 * and each tick's requests and bytes as nginx sent them ($bytes_sent: headers and bodies).
 * Each repository is made by localpuppet itself: web1's input published and the node's
 * first run from it, then one `publish --inputs DIR` of all N inputs (web1's and
 * node2..N's; --puppet none: no syntax check), so it holds what publish writes today,
 * whatever that is: an index of every node, or (with signed per-node documents) `nodes/`
 * too, which the node then reads. BENCH_TICK_PUBLISH_FLAGS adds flags to that publish and
 * to the publish of one input timed (e.g. --node-documents-only, which keeps the nodes out
 * of index.json: a node's first contact is then made before, as a fleet moving to it would
 * have). A size whose ticks fail (an index over the 16 MiB a node reads) says so, with the
 * node's message.
 */
import {execFileSync, spawnSync} from 'node:child_process'
import {existsSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {fileURLToPath} from 'node:url'

import {startNginx} from '../helpers/nginx.js'
import {farmBench} from './farm.js'

const BIN = fileURLToPath(new URL('../../bin/run.js', import.meta.url))
const DEMO = fileURLToPath(new URL('../../fixtures/demo/modules', import.meta.url))
const FAKE_PUPPET = fileURLToPath(new URL('../../fixtures/fake-puppet/puppet', import.meta.url))
const PUBLISH_FLAGS = (process.env.BENCH_TICK_PUBLISH_FLAGS ?? '').split(' ').filter(Boolean)

const run = (args: string[], env: NodeJS.ProcessEnv = {}) => execFileSync('node', [BIN, ...args], {stdio: ['ignore', 'ignore', 'pipe'], env: {...process.env, ...env}})

/** The first line a failed command said on stderr. */
function failure(error: unknown): string {
  const stderr = String((error as {stderr?: Buffer}).stderr ?? (error as Error).message)
  return stderr.split('\n').find((line) => line.trim() !== '') ?? 'failed'
}

/** A repository of foo 1.4.0 and `nodes` node inputs (web1 and node2..N, all published by one publish --inputs), and a node web1 that ran once from it. */
async function tickNode(work: string, nodes: number) {
  mkdirSync(work, {recursive: true})
  const key = join(work, 'key.pem')
  execFileSync('openssl', ['genpkey', '-algorithm', 'ed25519', '-out', key])
  execFileSync('openssl', ['pkey', '-in', key, '-pubout', '-out', join(work, 'key.pub.pem')])
  const archive = join(work, 'foo.tar.gz')
  run(['pack', 'foo/tags/1.4.0', '--module-dir', DEMO, '-o', archive, '--sign', key])
  const repo = join(work, 'repo')
  run(['publish', archive, '--repo', repo, '--sign', key])
  const inputs = join(work, 'inputs')
  mkdirSync(inputs)
  writeFileSync(join(inputs, 'web1.yaml'), 'app: foo/tags/1.4.0\n')
  run(['publish', '--node', 'web1', '--input', join(inputs, 'web1.yaml'), '--puppet', 'none', '--repo', repo, '--sign', key])

  const nginx = await startNginx(repo, join(work, 'nginx'), {requestLog: true, gzip: true})
  const node = join(work, 'node')
  for (const sub of ['modules', 'state', 'etc', 'fake']) mkdirSync(join(node, sub), {recursive: true})
  const config = join(node, 'etc', 'config.yaml')
  writeFileSync(config, [`source: ${nginx.url}`, `trust: ${join(work, 'key.pub.pem')}`, 'input_from: repository', 'node_name: web1', `input: ${join(node, 'input.yaml')}`, `module_dir: ${join(node, 'modules')}`, `state_dir: ${join(node, 'state')}`, `puppet: ${FAKE_PUPPET}`, ''].join('\n'))
  const env = {LOCALPUPPET_CONFIG: config, FAKE_PUPPET_DIR: join(node, 'fake'), FAKE_PUPPET_SLEEP: '0'}
  run(['apply', '--fetch'], env)
  for (let i = 2; i <= nodes; i++) writeFileSync(join(inputs, `node${i}.dc1.example.com.yaml`), `app: foo/tags/1.4.0\n# node ${i}\n`)
  const started = Date.now()
  execFileSync('node', [BIN, 'publish', '--inputs', inputs, '--puppet', 'none', '--repo', repo, '--sign', key, ...PUBLISH_FLAGS], {stdio: ['ignore', 'ignore', 'pipe'], maxBuffer: 64 * 1024 * 1024})
  const generated = Date.now() - started
  rmSync(inputs, {recursive: true})
  // The node's next tick: what it says when it fails.
  let refused: string | null = null
  try {
    run(['apply', '--fetch', '--if-changed'], env)
  } catch (error) {
    refused = failure(error)
  }

  const log = join(work, 'nginx', 'access.log')
  const kept = join(node, 'modules', '.localpuppet')
  const tick = () => spawnSync('node', [BIN, 'apply', '--fetch', '--if-changed'], {stdio: 'ignore', env: {...process.env, ...env}}).status
  /** One tick's requests as nginx logged them, and the bytes it sent. */
  const measure = (full: boolean) => {
    if (full && existsSync(kept)) for (const name of readdirSync(kept).filter((n) => n.startsWith('kept-'))) rmSync(join(kept, name), {recursive: true})
    const before = readFileSync(log, 'utf8').length
    const status = tick()
    const lines = readFileSync(log, 'utf8').slice(before).trim().split('\n')
    return {status, requests: lines.map((line) => line.split(' ').slice(1, 3).join(' ')), bytes: lines.reduce((sum, line) => sum + Number(line.split(' ')[3]), 0)}
  }

  const indexBytes = statSync(join(repo, 'index.json')).size
  const documents = existsSync(join(repo, 'nodes')) ? readdirSync(join(repo, 'nodes')).filter((name) => name.endsWith('.json')).length : 0
  return {nodes, env, kept, key, repo, work, indexBytes, documents, generated, refused, measure, stop: () => nginx.stop()}
}

type TickNode = Awaited<ReturnType<typeof tickNode>>

const tickCommand = (node: TickNode, full: boolean) =>
  `${full ? `rm -rf ${node.kept}/kept-*; ` : ''}LOCALPUPPET_CONFIG=${node.env.LOCALPUPPET_CONFIG} FAKE_PUPPET_DIR=${node.env.FAKE_PUPPET_DIR} FAKE_PUPPET_SLEEP=0 exec node ${BIN} apply --fetch --if-changed >/dev/null 2>&1`

/** Publishing web1's input (changed each time: a line appended) into the node's repository. */
const publishCommand = (node: TickNode) => {
  const input = join(node.work, 'web1.yaml')
  writeFileSync(input, 'app: foo/tags/1.4.0\n')
  return `echo "# $$" >> ${input}; exec node ${BIN} publish --node web1 --input ${input} --puppet none --repo ${node.repo} --sign ${node.key} ${PUBLISH_FLAGS.join(' ')} >/dev/null 2>&1`
}

export async function tickBench(dir: string, rounds: number): Promise<void> {
  const sizes = (process.env.BENCH_TICK_NODES ?? '10000,100000').split(',').map(Number)
  const started: TickNode[] = []
  try {
    const small = await tickNode(join(dir, 'tick-1'), 1)
    started.push(small)
    for (const size of sizes) {
      const large = await tickNode(join(dir, `tick-${size}`), size)
      started.push(large)
      console.log(`${size} nodes: published by one publish --inputs in ${(large.generated / 1000).toFixed(1)} s; index.json ${large.indexBytes} bytes, ${large.documents} node documents`)
    }

    for (const node of started) {
      const label = `${node.nodes} node${node.nodes === 1 ? '' : 's'}`
      if (node.refused !== null) {
        console.log(`tick (${label}; index.json ${node.indexBytes} bytes): the node's tick fails: ${node.refused}`)
        continue
      }

      const full = node.measure(true)
      const conditional = node.measure(false)
      console.log(`tick (${label}; index.json ${node.indexBytes} bytes): conditional ${conditional.bytes} bytes [${conditional.requests.join(', ')}] exit ${conditional.status}; without the kept copies ${full.bytes} bytes [${full.requests.join(', ')}] exit ${full.status}`)
    }

    for (const large of started.slice(1).filter((node) => node.refused === null)) {
      console.log(`tick ${large.nodes} / tick 1 (conditional, both):`)
      farmBench(tickCommand(large, false), tickCommand(small, false), rounds)
      console.log(`full tick ${large.nodes} (kept copies removed) / tick 1 (conditional):`)
      farmBench(tickCommand(large, true), tickCommand(small, false), rounds)
    }

    // Last: each publish makes the next tick read anew.
    for (const node of started) {
      console.log(`publish one node's input into ${node.nodes} node${node.nodes === 1 ? '' : 's'} (--puppet none; target <= 1 s):`)
      farmBench(publishCommand(node), null, Math.min(rounds, 5))
    }
  } finally {
    for (const node of started) await node.stop()
  }
}
