/**
 * The pull fleet benchmark (BENCH=pull):
 *
 *   apply --fetch / fetch    a node following a channel, input_from: repository, nothing
 *                            changed: `apply --fetch --if-changed` (one read of the signed
 *                            index gives its input and its channel's tag, already present,
 *                            so the run is skipped) vs a warm `fetch` of the same tag, over
 *                            Debian's nginx on 127.0.0.1; on the demo release and on
 *                            Debian's Puppet modules in one tag
 *   fleet status / curl      `fleet status --prometheus` over 1,000 simulated nodes (15
 *                            series each, every one the fleet view reads: 15,000,
 *                            backfilled into Debian's Prometheus with promtool) vs curl
 *                            sending the same three queries; peak memory
 */
import {execFileSync, spawn, spawnSync} from 'node:child_process'
import {cpSync, existsSync, mkdirSync, readdirSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'
import {fileURLToPath} from 'node:url'

import {fleetQueries} from '../../src/lib/fleet/sources/prometheus.js'
import {freePort, portOpen} from '../helpers/net.js'
import {startNginx} from '../helpers/nginx.js'

const BIN = fileURLToPath(new URL('../../bin/run.js', import.meta.url))
const DEMO = fileURLToPath(new URL('../../fixtures/demo/modules', import.meta.url))
const FAKE_PUPPET = fileURLToPath(new URL('../../fixtures/fake-puppet/puppet', import.meta.url))

type Time = (file: string, args: string[], env?: NodeJS.ProcessEnv, before?: () => void) => number
type Compare = (name: string, target: number | null, a: () => number, b: () => number, rounds?: number) => number
type Peak = (file: string, args: string[]) => number

const run = (args: string[], env: NodeJS.ProcessEnv = {}) => execFileSync('node', [BIN, ...args], {stdio: ['ignore', 'ignore', 'pipe'], env: {...process.env, ...env}})

/** A repository with `app`'s tag on channel stable and node web1's input following it; a node configured to pull it. */
async function channelNode(work: string, modules: string, app: string, tag: string, time: Time, compare: Compare, label: string, rounds: number): Promise<void> {
  mkdirSync(work, {recursive: true})
  execFileSync('openssl', ['genpkey', '-algorithm', 'ed25519', '-out', join(work, 'key.pem')])
  execFileSync('openssl', ['pkey', '-in', join(work, 'key.pem'), '-pubout', '-out', join(work, 'key.pub.pem')])
  const archive = join(work, `${app}.tar.gz`)
  run(['pack', `${app}/tags/${tag}`, '--module-dir', modules, '-o', archive, '--sign', join(work, 'key.pem')])
  const repo = join(work, 'repo')
  run(['publish', archive, '--repo', repo, '--sign', join(work, 'key.pem')])
  run(['promote', `${app}/tags/${tag}`, '--channel', 'stable', '--repo', repo, '--sign', join(work, 'key.pem')])
  writeFileSync(join(work, 'web1.yaml'), `app: ${app}/channels/stable\n`)
  run(['publish', '--node', 'web1', '--input', join(work, 'web1.yaml'), '--repo', repo, '--sign', join(work, 'key.pem')])
  const nginx = await startNginx(repo, join(work, 'nginx'))
  try {
    const node = join(work, 'node')
    for (const sub of ['modules', 'state', 'etc', 'fake', 'fetched']) mkdirSync(join(node, sub), {recursive: true})
    writeFileSync(
      join(node, 'etc', 'config.yaml'),
      [`source: ${nginx.url}`, `trust: ${join(work, 'key.pub.pem')}`, 'input_from: repository', 'node_name: web1', `input: ${join(node, 'input.yaml')}`, `module_dir: ${join(node, 'modules')}`, `state_dir: ${join(node, 'state')}`, `puppet: ${FAKE_PUPPET}`, ''].join('\n'),
    )
    const env = {LOCALPUPPET_CONFIG: join(node, 'etc', 'config.yaml'), FAKE_PUPPET_DIR: join(node, 'fake'), FAKE_PUPPET_SLEEP: '0'}
    run(['apply', '--fetch'], env)
    run(['fetch', `${app}/tags/${tag}`, '--source', nginx.url, '--trust', join(work, 'key.pub.pem'), '--module-dir', join(node, 'fetched')])
    compare(
      `apply --fetch / fetch (${label})`,
      1.2,
      () => time('node', [BIN, 'apply', '--fetch', '--if-changed'], env),
      () => time('node', [BIN, 'fetch', `${app}/tags/${tag}`, '--source', nginx.url, '--trust', join(work, 'key.pub.pem'), '--module-dir', join(node, 'fetched')]),
      rounds,
    )
  } finally {
    await nginx.stop()
  }
}

/** OpenMetrics text for `count` nodes: every series the fleet view reads, two samples each, the newest 10 s ago; and how many series. */
function simulatedFleet(count: number): {text: string; series: number} {
  const now = Date.now() / 1000
  const times = [now - 70, now - 10]
  const families: Array<[string, (i: number) => Array<[Record<string, string>, number]>]> = [
    ['localpuppet_desired_release_info', (i) => [[{node: `node${i}`, app: 'foo', ref: `foo/channels/${i % 20 === 0 ? 'canary' : 'stable'}`, channel: i % 20 === 0 ? 'canary' : 'stable', release: 'foo/tags/1.1.0', input: 'repository'}, 1]]],
    ['localpuppet_applied_release_info', (i) => [[{app: 'foo', release: i % 7 === 0 ? 'foo/tags/1.0.0' : 'foo/tags/1.1.0'}, 1]]],
    ['localpuppet_healthy_since_timestamp_seconds', () => [[{}, now - 3600]]],
    ['localpuppet_last_run_success', (i) => [[{}, i % 50 === 0 ? 0 : 1]]],
    ['localpuppet_last_success_timestamp_seconds', () => [[{}, now - 600]]],
    ['localpuppet_last_attempt_timestamp_seconds', () => [[{}, now - 300]]],
    ['localpuppet_last_attempt_exit_code', (i) => [[{state: i % 50 === 0 ? 'failed' : 'succeeded'}, i % 50 === 0 ? 1 : 0]]],
    ['localpuppet_puppet_disabled', () => [[{message: ''}, 0]]],
    ['localpuppet_release_info', () => [[{app: 'foo', ref: 'foo/channels/stable', release: 'foo/tags/1.1.0'}, 1]]],
    ['localpuppet_last_run_resources', () => ['changed', 'failed', 'out_of_sync', 'total', 'corrective_change'].map((kind) => [{kind}, kind === 'total' ? 120 : 0] as [Record<string, string>, number])],
    ['localpuppet_run_in_progress', () => [[{}, 0]]],
  ]
  const lines: string[] = []
  let series = 0
  const esc = (value: string) => value.replaceAll('\\', '\\\\').replaceAll('"', '\\"')
  for (const [name, samples] of families) {
    lines.push(`# TYPE ${name} gauge`)
    for (let i = 0; i < count; i++) {
      for (const [labels, value] of samples(i)) {
        series++
        const all = {instance: `node${i}:9100`, job: 'localpuppet', ...labels}
        const text = Object.entries(all).map(([k, v]) => `${k}="${esc(v)}"`).join(',')
        for (const at of times) lines.push(`${name}{${text}} ${value} ${at.toFixed(3)}`)
      }
    }
  }

  lines.push('# EOF')
  return {text: lines.join('\n') + '\n', series}
}

async function promFleet(work: string, time: Time, compare: Compare, peakMb: Peak, rounds: number): Promise<void> {
  mkdirSync(work, {recursive: true})
  const nodes = 1000
  const fleet = simulatedFleet(nodes)
  writeFileSync(join(work, 'fleet.om'), fleet.text)
  execFileSync('promtool', ['tsdb', 'create-blocks-from', 'openmetrics', join(work, 'fleet.om'), join(work, 'data')], {stdio: 'ignore'})
  writeFileSync(join(work, 'prometheus.yml'), 'global:\n  scrape_interval: 1m\nscrape_configs: []\n')
  const port = await freePort()
  const prometheus = spawn('prometheus', [`--config.file=${join(work, 'prometheus.yml')}`, `--storage.tsdb.path=${join(work, 'data')}`, `--web.listen-address=127.0.0.1:${port}`], {stdio: 'ignore'})
  try {
    const url = `http://127.0.0.1:${port}`
    const until = Date.now() + 60_000
    while (!(await portOpen(port)) || spawnSync('curl', ['-sf', `${url}/-/ready`]).status !== 0) {
      if (Date.now() > until) throw new Error('prometheus did not start')
      await sleep(200)
    }

    const check = spawnSync('node', [BIN, 'fleet', 'status', '--prometheus', url, '--json'], {encoding: 'utf8'})
    const status = JSON.parse(check.stdout)
    console.log(`fleet status: ${status.nodes.length} nodes from ${nodes} simulated (${fleet.series} series), exit ${check.status}`)
    // The very queries fleet status sends (its default lookback: 1 day).
    const queries = fleetQueries(86_400)
    const curl = queries.map((q) => `curl -sf -o /dev/null --data-urlencode 'query=${q}' ${url}/api/v1/query`).join(' && ')
    // fleet status exits 1 here (some simulated nodes are off their release): sh keeps time() from taking that for a failure, as it wraps curl.
    compare('fleet status / curl', null, () => time('sh', ['-c', `node '${BIN}' fleet status --prometheus ${url} --json >/dev/null; exit 0`]), () => time('sh', ['-c', curl]), rounds)
    console.log(`fleet status --prometheus over ${nodes} nodes: peak ${peakMb('sh', ['-c', `node '${BIN}' fleet status --prometheus ${url} --json >/dev/null; exit 0`]).toFixed(0)} MB`)
  } finally {
    prometheus.kill('SIGTERM')
  }
}

export async function pullBench(dir: string, tools: {time: Time; compare: Compare; peakMb: Peak; rounds: number}): Promise<void> {
  const {time, compare, peakMb, rounds} = tools
  await channelNode(join(dir, 'pull-demo'), DEMO, 'foo', '1.4.0', time, compare, 'demo', rounds)
  const debian = '/usr/share/puppet/modules'
  if (existsSync(debian) && readdirSync(debian).length >= 20) {
    const modules = join(dir, 'pull-debian', 'modules')
    const release = join(modules, 'site', 'tags', '1.0.0')
    for (const name of readdirSync(debian).filter((n) => /^[a-z][a-z0-9_]*$/.test(n))) cpSync(join(debian, name), join(release, name), {recursive: true, dereference: true})
    writeFileSync(join(release, 'manifest.yaml'), 'modulepath: []\n')
    await channelNode(join(dir, 'pull-debian'), modules, 'site', '1.0.0', time, compare, 'Debian modules', rounds)
  } else {
    console.log('pull: Debian puppet-module-* packages not installed (BENCH=fetch installs them); the Debian release is skipped')
  }

  await promFleet(join(dir, 'pull-prometheus'), time, compare, peakMb, rounds)
}
