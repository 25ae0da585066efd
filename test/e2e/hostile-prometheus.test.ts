// Issue 33: promote --require-healthy and fleet status --prometheus against a Prometheus
// (or the nodes whose metrics it scrapes) that lies: a huge answer, a drip, numbers that
// cannot be, escape sequences in labels and error text, credentials in the URL, and the
// gate's edge cases. Every case ends by itself (a watchdog kills the command and fails the
// test otherwise) with the README's exit code, never 70.
import {writeFile} from 'node:fs/promises'
import {createServer} from 'node:http'
import {join} from 'node:path'

import test, {type ExecutionContext} from 'ava'

import {runBounded} from '../helpers/cli.js'
import {head, hostileServer} from '../helpers/hostile-server.js'
import {tempDir} from '../helpers/temp.js'

const NOW = Math.floor(Date.now() / 1000)
type Series = {metric: Record<string, string>; value: [unknown, unknown]}

/** A stand-in for Prometheus: `answer(query)` is the body (an object is sent as JSON, status 200). Records each request's Authorization. */
async function fakePrometheus(t: ExecutionContext, answer: (query: string) => {status?: number; body: unknown}) {
  const authorizations: Array<string | undefined> = []
  const server = createServer(async (req, res) => {
    let form = ''
    for await (const chunk of req) form += chunk
    authorizations.push(req.headers.authorization)
    const {status = 200, body} = answer(new URLSearchParams(form).get('query') ?? '')
    res.writeHead(status, {'content-type': 'application/json'})
    res.end(Buffer.isBuffer(body) ? body : JSON.stringify(body))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  server.on('connection', (socket) => t.teardown(() => socket.destroy()))
  return {url: `http://127.0.0.1:${(server.address() as {port: number}).port}`, authorizations}
}

const vector = (result: unknown[]) => ({status: 'success', data: {resultType: 'vector', result}})

interface NodeSpec {
  node: string
  target?: string
  applied?: string
  state?: string
  at?: number
  healthySince?: number
  disabled?: string
  app?: string
  channel?: string
  /** Whether its newest completed run succeeded (default: its state is succeeded). */
  success?: boolean
  /** localpuppet_last_attempt_info's labels (default: none written). */
  runId?: string
  firstError?: string
}

/** A node's series as its exporter writes them (see README, Monitoring): following foo/channels/canary, healthy on 1.4.0 for an hour. */
function nodeSeries(spec: NodeSpec): Series[] {
  const {node, target = `${node}:9100`, applied = 'foo/tags/1.4.0', state = 'succeeded', at = NOW - 60, healthySince = NOW - 3600, disabled, app = 'foo', channel = 'canary', success = state === 'succeeded', runId, firstError} = spec
  const series = (name: string, labels: Record<string, string>, value: unknown): Series => ({
    metric: {__name__: `localpuppet_${name}`, instance: target, job: 'localpuppet', ...labels},
    value: [NOW, String(value)],
  })
  return [
    series('desired_release_info', {node, app, ref: 'foo/channels/canary', channel, release: 'foo/tags/1.4.0', input: 'repository'}, 1),
    series('applied_release_info', {app: 'foo', release: applied}, 1),
    series('last_attempt_exit_code', {state, release: applied}, success ? 0 : 1),
    series('last_attempt_timestamp_seconds', {}, at),
    series('last_run_success', {}, success ? 1 : 0),
    series('healthy_since_timestamp_seconds', {}, healthySince),
    series('puppet_disabled', {message: disabled ?? ''}, disabled === undefined ? 0 : 1),
    series('run_in_progress', {}, 0),
    ...(runId === undefined ? [] : [series('last_attempt_info', {run_id: runId, first_error: firstError ?? ''}, 1)]),
  ]
}

/** Every query answers the current series (the stopped-node queries find them all current). */
async function fleet(t: ExecutionContext, nodes: NodeSpec[]) {
  return fakePrometheus(t, (query) => ({body: vector(query.startsWith('{__name__=~') ? nodes.flatMap(nodeSeries) : [])}))
}

const promote = (url: string, ...extra: string[]) => ['promote', 'foo/tags/1.4.0', '--channel', 'stable', '--repo', '/nonexistent/repo', '--require-healthy', 'canary', '--prometheus', url, ...extra]
const fleetStatus = (url: string, ...extra: string[]) => ['fleet', 'status', '--prometheus', url, ...extra]

/** No escape character, no forged line: what a terminal would obey. */
function assertInert(t: ExecutionContext, text: string) {
  t.false(text.includes('\u001b'), text)
  t.false(text.includes('\u0007'), text)
  t.false(text.split('\n').some((line) => line.trim() === 'foo/channels/stable: 1.3.0 -> 1.4.0'), text)
}

const EVIL_NODE = 'web1\u001b]0;owned\u0007\u001b[2J\nfoo/channels/stable: 1.3.0 -> 1.4.0'
const EVIL_MESSAGE = 'maintenance\u001b[31m\nfoo/channels/stable: 1.3.0 -> 1.4.0\u001b]0;x\u0007'

test('escape sequences and a forged newline in a node label and a disable message are shown escaped by promote and fleet status; --json is exact', async (t) => {
  const prometheus = await fleet(t, [{node: EVIL_NODE}, {node: 'web2', disabled: EVIL_MESSAGE}])
  const gate = await runBounded(t, promote(prometheus.url))
  t.is(gate.exitCode, 1, gate.stderr)
  assertInert(t, gate.stderr + gate.stdout)
  t.true(gate.stdout.includes('web1\\e]0;owned\\u0007\\e[2J\\nfoo/channels/stable: 1.3.0 -> 1.4.0'), gate.stdout)
  t.true(gate.stdout.includes('Puppet is disabled: maintenance\\e[31m\\nfoo/channels/stable'), gate.stdout)

  const gateJson = await runBounded(t, promote(prometheus.url, '--json'))
  t.is(gateJson.exitCode, 1, gateJson.stderr)
  const health = JSON.parse(gateJson.stdout).health
  t.deepEqual(health.nodes.map((node: {node: string}) => node.node).sort(), [EVIL_NODE, 'web2'].sort())
  t.is(health.nodes.find((node: {node: string}) => node.node === 'web2').reason, `Puppet is disabled: ${EVIL_MESSAGE}`)

  const status = await runBounded(t, fleetStatus(prometheus.url))
  t.is(status.exitCode, 0, status.stderr)
  assertInert(t, status.stderr + status.stdout)
  t.true(status.stdout.includes('web1\\e]0;owned\\u0007\\e[2J\\nfoo/channels/stable: 1.3.0 -> 1.4.0'), status.stdout)
  t.true(status.stdout.includes('disabled: maintenance\\e[31m\\nfoo/channels/stable'), status.stdout)

  const statusJson = JSON.parse((await runBounded(t, fleetStatus(prometheus.url, '--json'))).stdout)
  t.deepEqual(statusJson.nodes.map((node: {node: string}) => node.node).sort(), [EVIL_NODE, 'web2'].sort())
  t.is(statusJson.nodes.find((node: {node: string}) => node.node === 'web2').disabled, EVIL_MESSAGE)
})

test("Prometheus' error text with escape sequences and a newline is shown escaped, 69", async (t) => {
  const prometheus = await fakePrometheus(t, () => ({status: 422, body: {status: 'error', errorType: 'execution\u001b[2J', error: 'bad\nfoo/channels/stable: 1.3.0 -> 1.4.0\u001b]0;x\u0007'}}))
  for (const args of [promote(prometheus.url), fleetStatus(prometheus.url)]) {
    const result = await runBounded(t, args)
    t.is(result.exitCode, 69, result.stderr)
    assertInert(t, result.stderr + result.stdout)
    t.regex(result.stderr, /^localpuppet: prometheus http:\/\/127\.0\.0\.1:\d+: HTTP 422: execution\\e\[2J: bad\\nfoo\/channels\/stable: 1\.3\.0 -> 1\.4\.0\\e\]0;x\\u0007 \(query /)
  }
})

test('credentials in --prometheus authenticate the queries and are in no output, --json or message', async (t) => {
  const prometheus = await fleet(t, [{node: 'web1', state: 'failed'}])
  const url = prometheus.url.replace('http://', 'http://ops:s3cret@')
  for (const [args, exitCode] of [
    [promote(url), 1],
    [promote(url, '--json'), 1],
    [fleetStatus(url), 0],
    [fleetStatus(url, '--json'), 0],
  ] as const) {
    const result = await runBounded(t, [...args])
    t.is(result.exitCode, exitCode, result.stderr)
    t.false(`${result.stdout}${result.stderr}`.includes('s3cret'), `${result.stdout}${result.stderr}`)
    t.false(`${result.stdout}${result.stderr}`.includes('ops:'), `${result.stdout}${result.stderr}`)
  }

  t.true(prometheus.authorizations.length > 0)
  t.true(prometheus.authorizations.every((header) => header === `Basic ${Buffer.from('ops:s3cret').toString('base64')}`), prometheus.authorizations.join(', '))

  // And in an error: nothing listens there any more.
  const refused = await runBounded(t, promote('http://ops:s3cret@127.0.0.1:9/', '--json'))
  t.is(refused.exitCode, 69, refused.stdout)
  t.false(`${refused.stdout}${refused.stderr}`.includes('s3cret'), refused.stdout)
})

test('a Prometheus that sends its header, then a byte a second, is given up at --prometheus-timeout (69)', async (t) => {
  const server = await hostileServer((_path, socket) => {
    socket.write(head(200, {'content-type': 'application/json'}))
    const timer = setInterval(() => socket.write(' '), 1000)
    socket.on('close', () => clearInterval(timer))
  })
  t.teardown(() => server.close())
  for (const args of [promote(server.url, '--prometheus-timeout', '3s'), fleetStatus(server.url, '--prometheus-timeout', '3s')]) {
    const result = await runBounded(t, args)
    t.is(result.exitCode, 69, result.stderr)
    t.regex(result.stderr, /^localpuppet: prometheus http:\/\/127\.0\.0\.1:\d+: query .*: no whole answer within 3 s \(--prometheus-timeout\)$/m)
  }
})

for (const [what, value, message] of [
  ['a sample time of NaN', ['NaN', '1'], 'sample ["NaN","1"]: its time is not a time (seconds since 1970)'],
  ['a sample time of "abc"', ['abc', '1'], 'sample ["abc","1"]: its time is not a time (seconds since 1970)'],
  ['a newest attempt at 1e20', [NOW, '1e20'], 'value "1e20" is not a time (seconds since 1970)'],
  ['a value that is a number', [NOW, 5], `sample [${NOW},5]: its value is not a number`],
] as const) {
  test(`${what} is 69 naming the series and the value, never 70 nor a verdict`, async (t) => {
    const series = nodeSeries({node: 'web1'}).map((s) => (s.metric.__name__ === 'localpuppet_last_attempt_timestamp_seconds' ? {...s, value: value as [unknown, unknown]} : s))
    const prometheus = await fakePrometheus(t, (query) => ({body: vector(query.startsWith('{__name__=~') ? series : [])}))
    for (const args of [promote(prometheus.url), fleetStatus(prometheus.url)]) {
      const result = await runBounded(t, args)
      t.is(result.exitCode, 69, result.stderr)
      t.true(result.stderr.includes(`series localpuppet_last_attempt_timestamp_seconds{instance="web1:9100", job="localpuppet"}: ${message}`), result.stderr)
    }
  })
}

test('result entries of the wrong JSON type are 69, never 70', async (t) => {
  for (const result of [[1], [null], [{metric: 'x', value: [NOW, '1']}], [{metric: {node: 5}, value: [NOW, '1']}]]) {
    const prometheus = await fakePrometheus(t, () => ({body: vector(result)}))
    const run = await runBounded(t, promote(prometheus.url))
    t.is(run.exitCode, 69, run.stderr)
    t.is(run.stderr.split('\n').filter((line) => line.startsWith('localpuppet:')).length, 1, run.stderr)
  }

  const notAList = await fakePrometheus(t, () => ({body: {status: 'success', data: {resultType: 'vector', result: {a: 1}}}}))
  t.is((await runBounded(t, promote(notAList.url))).exitCode, 69)
})

test('the gate: a clock ahead is stale, the state label is exact, a canary that never resolved its app is counted and named', async (t) => {
  const prometheus = await fleet(t, [
    {node: 'web1'},
    {node: 'ahead', at: NOW + 3600},
    // Its run succeeded, by its exit code and last_run_success; its state label is not one the metrics write.
    {node: 'shouty', state: 'SUCCEEDED', success: true},
    {node: 'unresolved', app: '', channel: '', applied: 'foo/tags/1.3.0'},
  ])
  const result = await runBounded(t, promote(prometheus.url, '--json'))
  t.is(result.exitCode, 1, result.stderr)
  const health = JSON.parse(result.stdout).health
  const state = Object.fromEntries(health.nodes.map((node: {node: string; state: string}) => [node.node, node.state]))
  t.deepEqual(state, {web1: 'healthy', ahead: 'stale', shouty: 'failed', unresolved: 'not yet run'})
  t.regex(health.why, /^3 of 4 nodes following foo\/channels\/canary are not healthy on foo\/tags\/1\.4\.0: .*unresolved \(not yet run\)/)
})

test('--require-healthy and fleet status --channel take a channel name only (64), before Prometheus is asked', async (t) => {
  const prometheus = await fleet(t, [{node: 'web1'}])
  for (const args of [
    ['promote', 'foo/tags/1.4.0', '--channel', 'stable', '--repo', '/nonexistent/repo', '--require-healthy', 'Canary\u001b[2J', '--prometheus', prometheus.url],
    fleetStatus(prometheus.url, '--channel', 'can ary'),
  ]) {
    const result = await runBounded(t, args)
    t.is(result.exitCode, 64, result.stderr)
    t.regex(result.stderr, /^localpuppet: (--require-healthy "Canary\\u001b\[2J"|--channel "can ary"): not a channel name/)
  }

  t.deepEqual(prometheus.authorizations, [])
})

test('an answer of some 180 MB of small series keeps promote --require-healthy within bounded memory', async (t) => {
  // 70,000 nodes of 15 series each (what their exporters write, and four more resources):
  // every query answers all of it, three at once, as a large fleet's Prometheus would.
  const parts: string[] = []
  for (let i = 0; i < 70_000; i++) {
    const node = `node${i}.example.com`
    const series = [
      ...nodeSeries({node, channel: 'stable'}),
      ...['changed', 'failed', 'out_of_sync', 'total', 'corrective_change'].map((kind) => ({metric: {__name__: 'localpuppet_last_run_resources', instance: `${node}:9100`, job: 'localpuppet', kind}, value: [NOW, '0']})),
      {metric: {__name__: 'localpuppet_release_info', instance: `${node}:9100`, job: 'localpuppet', release: 'foo/tags/1.4.0', ref: 'foo/channels/stable', app: 'foo'}, value: [NOW, '1']},
      {metric: {__name__: 'localpuppet_last_success_timestamp_seconds', instance: `${node}:9100`, job: 'localpuppet'}, value: [NOW, String(NOW - 60)]},
    ]
    parts.push(series.map((s) => JSON.stringify(s)).join(','))
  }

  const body = Buffer.from(`{"status":"success","data":{"resultType":"vector","result":[${parts.join(',')}]}}`)
  t.log(`answer: ${Math.round(body.length / 1e6)} MB`)
  t.true(body.length > 150e6)
  const prometheus = await fakePrometheus(t, () => ({body}))
  const result = await runBounded(t, promote(prometheus.url, '--min-nodes', '1'), {}, 300_000)
  t.log(`peak RSS of promote --require-healthy: ${Math.round(result.maxRssMb)} MiB`)
  // None of the 70,000 follows canary: the gate is shut, having read all three answers.
  t.is(result.exitCode, 1, result.stderr)
  t.regex(result.stderr, /no node follows foo\/channels\/canary/)
  // Measured: 357 MiB for 181 MB (the client parsing each answer whole took 6.4 GB and aborted).
  t.true(result.maxRssMb < 768, `peak RSS ${Math.round(result.maxRssMb)} MiB`)
})

test('issue 35: the prometheus setting is what fleet status and promote --require-healthy read; config shows it without its credentials', async (t) => {
  const prometheus = await fleet(t, [{node: 'web1'}, {node: 'web2'}])
  const dir = await tempDir(t)
  const config = join(dir, 'config.yaml')
  const withCredentials = prometheus.url.replace('http://', 'http://ops:s3cret@')
  await writeFile(config, `prometheus: ${withCredentials}\n`, {mode: 0o600})
  const env = {LOCALPUPPET_CONFIG: config}
  const status = await runBounded(t, ['fleet', 'status', '--json'], env)
  t.is(status.exitCode, 0, status.stderr)
  t.deepEqual(JSON.parse(status.stdout).nodes.map((node: {node: string}) => node.node), ['web1', 'web2'])
  t.true(prometheus.authorizations.every((authorization) => authorization === `Basic ${Buffer.from('ops:s3cret').toString('base64')}`))
  const asked = prometheus.authorizations.length
  const gate = await runBounded(t, ['promote', 'foo/tags/1.4.0', '--channel', 'stable', '--repo', '/nonexistent/repo', '--require-healthy', 'canary'], env)
  t.regex(gate.stdout + gate.stderr, /web1/, 'the gate read the nodes from the prometheus setting')
  t.true(prometheus.authorizations.length > asked)
  const shown = await runBounded(t, ['config'], env)
  t.regex(shown.stdout, new RegExp(`^prometheus +http://127\\.0\\.0\\.1:\\d+/? +${config.replaceAll('.', '\\.')}:1$`, 'm'))
  t.notRegex(shown.stdout + shown.stderr, /s3cret/)
  // MCollective's own flags still name MCollective.
  const mco = await runBounded(t, ['fleet', 'status', '--nodes', join(dir, 'fleet.txt'), '--mco', join(dir, 'no-mco')], env)
  t.is(mco.exitCode, 69, mco.stderr)
  t.regex(mco.stderr, /no-mco/)
})

test('issue 35: fleet status with no Prometheus and no reachable MCollective fails at once (69) naming both ways, not after mco\'s minute of retries', async (t) => {
  const dir = await tempDir(t)
  const env = {LOCALPUPPET_CONFIG: join(dir, 'config.yaml'), HOME: dir}
  await writeFile(join(dir, 'config.yaml'), 'source: /srv/repo\n', {mode: 0o600})
  // mco's client configuration (~/.mcollective, as mco reads it) names a broker that is down.
  const closed = createServer()
  await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve))
  const port = (closed.address() as {port: number}).port
  await new Promise<void>((resolve) => closed.close(() => resolve()))
  await writeFile(join(dir, '.mcollective'), `connector = rabbitmq\nplugin.rabbitmq.pool.size = 1\nplugin.rabbitmq.pool.1.host = 127.0.0.1\nplugin.rabbitmq.pool.1.port = ${port}\n`)
  const status = await runBounded(t, ['fleet', 'status'], env, 20_000)
  t.is(status.exitCode, 69, status.stderr)
  const lines = status.stderr.trim().split('\n')
  t.is(lines[0], `localpuppet: no fleet to read: no Prometheus is set, and MCollective cannot be used: its broker 127.0.0.1:${port} (${join(dir, '.mcollective')}) cannot be reached (ECONNREFUSED)`)
  t.regex(status.stderr, /--prometheus URL reads the fleet from the node metrics \(or set prometheus in \/etc\/localpuppet\/config\.yaml, env LOCALPUPPET_PROMETHEUS\)/)
  t.regex(status.stderr, /--via mco asks each node through MCollective/)
})

test('issue 35: a refused gated promote prints its table on stdout (a CI step keeping stdout keeps why), its refusal on stderr', async (t) => {
  const prometheus = await fleet(t, [{node: 'web1'}, {node: 'web2', disabled: 'maintenance'}])
  const gate = await runBounded(t, promote(prometheus.url))
  t.is(gate.exitCode, 1, gate.stderr)
  t.regex(gate.stdout, /^NODE +APPLIED +HEALTH +WHY$/m)
  t.regex(gate.stdout, /^web2 +foo\/tags\/1\.4\.0 +disabled +Puppet is disabled: maintenance$/m)
  t.regex(gate.stdout, /^not healthy: 1 of 2 nodes following foo\/channels\/canary are not healthy on foo\/tags\/1\.4\.0: web2 \(disabled\)/m)
  t.is(gate.stderr, 'localpuppet: foo/channels/stable not moved: 1 of 2 nodes following foo/channels/canary are not healthy on foo/tags/1.4.0: web2 (disabled)')
})

test("issue 35: a failed node's run id and Puppet's first error, from its metrics, are in the gate's refusal and fleet status, escaped and cut at 300 characters", async (t) => {
  const runId = '20261128T001500.123Z-4f2a'
  const error = `Error: Evaluation Error: Error while evaluating a Function Call, broken\u001b]0;owned\u0007\nfoo/channels/stable: 1.3.0 -> 1.4.0 ${'x'.repeat(5000)}`
  const prometheus = await fleet(t, [{node: 'web1', runId: '20261128T000000.000Z-0000'}, {node: 'web2', state: 'failed', runId, firstError: error}])
  const gate = await runBounded(t, promote(prometheus.url))
  t.is(gate.exitCode, 1, gate.stderr)
  assertInert(t, gate.stderr + gate.stdout)
  const why = gate.stdout.split('\n').find((line) => line.startsWith('web2 '))!
  t.true(why.includes(`failed   newest attempt failed (exit 1) on foo/tags/1.4.0, run ${runId}: Error: Evaluation Error: Error while evaluating a Function Call, broken\\e]0;owned\\u0007\\nfoo/channels/stable`), why)
  t.true(why.endsWith('x…') && why.length < 500, `bounded: ${why.length} characters`)
  t.regex(gate.stdout, /^web1 +foo\/tags\/1\.4\.0 +healthy +healthy on it for 1h$/m, 'no error for a node that did not fail')
  const json = JSON.parse((await runBounded(t, promote(prometheus.url, '--json'))).stdout)
  t.like(json.health.nodes.find((node: {node: string}) => node.node === 'web2'), {runId, firstError: `${error.slice(0, 300)}…`})

  const status = await runBounded(t, fleetStatus(prometheus.url))
  t.is(status.exitCode, 0, status.stderr)
  assertInert(t, status.stderr + status.stdout)
  const row = status.stdout.split('\n').find((line) => line.startsWith('web2 '))!
  // Puppet's message to its first line (a newline in it ends it), escaped.
  t.true(row.endsWith(` run ${runId}: Error: Evaluation Error: Error while evaluating a Function Call, broken\\e]0;owned\\u0007`), row)
  const statusJson = JSON.parse((await runBounded(t, fleetStatus(prometheus.url, '--json'))).stdout)
  t.like(statusJson.nodes.find((node: {node: string}) => node.node === 'web2'), {runId, message: `${error.slice(0, 300)}…`})
  t.like(statusJson.nodes.find((node: {node: string}) => node.node === 'web1'), {runId: '20261128T000000.000Z-0000', message: null})
})
