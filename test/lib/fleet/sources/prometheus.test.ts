import test from 'ava'

import {FleetUnavailableError} from '../../../../src/lib/errors.js'
import {MAX_KEPT_CHARS, MAX_NODES, fleetStatusViaPrometheus, readPromFleet} from '../../../../src/lib/fleet/sources/prometheus.js'
import type {RepositoryIndex} from '../../../../src/lib/repository/repository-index.js'
import {testServer} from '../../../helpers/repository.js'

/*
 * The fleet view against a stand-in for Prometheus' HTTP API: each query's answer is given,
 * so what the view makes of a node is exact (a real Prometheus: test/e2e/pull-fleet.test.ts).
 */

const NOW = Date.parse('2026-11-25T12:00:00.000Z') / 1000
type Series = {metric: Record<string, string>; value?: [number, string]; values?: Array<[number, string]>}

/** Answers each query with `answers[query]` (a vector), or a matrix for a range selector; records the queries. */
async function fakePrometheus(t: import('ava').ExecutionContext, answers: (query: string) => {resultType: 'vector' | 'matrix'; result: Series[]}) {
  const queries: string[] = []
  const server = await testServer('/nonexistent', async (req, res) => {
    let body = ''
    for await (const chunk of req) body += chunk
    const query = new URLSearchParams(body).get('query') ?? ''
    queries.push(query)
    res.writeHead(200, {'content-type': 'application/json'})
    res.end(JSON.stringify({status: 'success', data: answers(query)}))
    return true
  })
  t.teardown(() => server.close())
  return {url: server.url, queries}
}

const sample = (name: string, labels: Record<string, string>, value: number, target = 'web1:9100'): Series => ({
  metric: {__name__: `localpuppet_${name}`, instance: target, job: 'localpuppet', ...labels},
  value: [NOW, String(value)],
})
const desired = (release: string, target = 'web1:9100', node = 'web1') => ({node, app: 'foo', ref: 'foo/channels/canary', channel: 'canary', release, input: 'repository', instance: target})

/** web1 reports now: applied 1.4.0, its channel resolved to 1.4.0 on its last run, its newest attempt refused before resolving. */
function current(): Series[] {
  return [
    sample('desired_release_info', desired('foo/tags/1.4.0'), 1),
    sample('applied_release_info', {app: 'foo', release: 'foo/tags/1.4.0'}, 1),
    sample('release_info', {app: 'foo', ref: 'foo/channels/canary', release: 'foo/tags/1.4.0'}, 1),
    sample('last_attempt_exit_code', {state: 'refused', release: ''}, 65),
    sample('last_attempt_timestamp_seconds', {}, NOW - 60),
    sample('last_run_success', {}, 1),
  ]
}

test('a node that stopped reporting is shown with the label set it reported last, not whichever comes first', async (t) => {
  const older = {metric: {__name__: 'localpuppet_desired_release_info', job: 'localpuppet', ...desired('foo/tags/1.3.0', 'web2:9100', 'web2')}}
  const newer = {metric: {__name__: 'localpuppet_desired_release_info', job: 'localpuppet', ...desired('foo/tags/1.4.0', 'web2:9100', 'web2')}}
  const prometheus = await fakePrometheus(t, (query) => {
    if (query.startsWith('{__name__=~')) return {resultType: 'vector', result: current()}
    if (query.startsWith('last_over_time(localpuppet_desired_release_info')) {
      // Both label sets web2 reported within the lookback; the older first.
      return {resultType: 'vector', result: [sample('desired_release_info', desired('foo/tags/1.4.0'), 1), {...older, value: [NOW, '1']}, {...newer, value: [NOW, '1']}]}
    }

    if (query.startsWith('last_over_time(localpuppet_last_attempt')) return {resultType: 'vector', result: [sample('last_attempt_timestamp_seconds', {}, NOW - 7200, 'web2:9100')]}
    // What web2 applied: 1.3.0, then 1.4.0 (scraped last).
    if (query.startsWith('localpuppet_applied_release_info')) {
      const applied = (release: string) => ({metric: {__name__: 'localpuppet_applied_release_info', job: 'localpuppet', instance: 'web2:9100', app: 'foo', release}})
      return {resultType: 'matrix', result: [{...applied('foo/tags/1.4.0'), values: [[NOW - 4000, '1']]}, {...applied('foo/tags/1.3.0'), values: [[NOW - 9000, '1']]}]}
    }

    // The raw samples: 1.4.0 was scraped last.
    return {resultType: 'matrix', result: [{...newer, values: [[NOW - 4000, '1'], [NOW - 3000, '1']]}, {...older, values: [[NOW - 9000, '1'], [NOW - 5000, '1']]}]}
  })
  const fleet = await readPromFleet(prometheus.url)
  // Issue 35: what it applied last is shown, not '-'.
  t.like(fleet.nodes.find((node) => node.node === 'web2'), {state: 'stopped reporting', stopped: true, desired: 'foo/tags/1.4.0', applied: 'foo/tags/1.4.0', at: new Date((NOW - 7200) * 1000).toISOString()})
  t.true(prometheus.queries.includes('localpuppet_applied_release_info{instance=~"web2:9100"}[86400s]'), prometheus.queries.join('\n'))
  t.true(prometheus.queries.some((query) => query === 'localpuppet_desired_release_info{instance=~"web2:9100"}[86400s]'), prometheus.queries.join('\n'))

  // Only one label set: no query for the newest (one for what the stopped node applied).
  const single = await fakePrometheus(t, (query) =>
    query.startsWith('{__name__=~')
      ? {resultType: 'vector', result: current()}
      : query.startsWith('last_over_time(localpuppet_desired')
        ? {resultType: 'vector', result: [{...older, value: [NOW, '1']}]}
        : {resultType: query.endsWith('s]') && !query.startsWith('last_over_time') ? 'matrix' : 'vector', result: []},
  )
  t.like((await readPromFleet(single.url)).nodes.find((node) => node.node === 'web2'), {desired: 'foo/tags/1.3.0', applied: null})
  t.is(single.queries.length, 4)
  t.false(single.queries.some((query) => query.startsWith('localpuppet_desired_release_info{')))
})

test("RELEASE is the newest attempt's (a refused one's: none), not the newest completed run's", async (t) => {
  const prometheus = await fakePrometheus(t, (query) => ({resultType: 'vector', result: query.startsWith('{__name__=~') ? current() : []}))
  t.like((await readPromFleet(prometheus.url)).nodes[0], {node: 'web1', state: 'refused', release: null, applied: 'foo/tags/1.4.0'})

  // Metrics written before the exit code had a release label: the newest completed run's, as before.
  const older = await fakePrometheus(t, (query) => ({
    resultType: 'vector',
    result: query.startsWith('{__name__=~') ? current().map((s) => (s.metric.__name__ === 'localpuppet_last_attempt_exit_code' ? sample('last_attempt_exit_code', {state: 'failed'}, 1) : s)) : [],
  }))
  t.like((await readPromFleet(older.url)).nodes[0], {state: 'failed', release: 'foo/tags/1.4.0'})
})

test("with the repository's index, wanted is what the channel names now: a node that has not applied it is not on its release", async (t) => {
  const prometheus = await fakePrometheus(t, (query) => ({resultType: 'vector', result: query.startsWith('{__name__=~') ? current() : []}))
  const index = (canary: string): RepositoryIndex => ({format: 1, version: 7, apps: {foo: {tags: {'1.4.0': {} as never, '1.5.0': {} as never}, channels: {canary}}}})

  const lastRun = await fleetStatusViaPrometheus(prometheus.url)
  t.like(lastRun.nodes[0], {desired: 'foo/tags/1.4.0', onWanted: true})
  t.like(lastRun, {ok: true, wantedFrom: {from: 'last run'}})

  // promote moved canary to 1.5.0; web1 has not run since.
  const wanted = {source: 'https://releases.example.com/puppet', index: index('1.5.0'), version: 7, signedBy: 'abc', warnings: []}
  const now = await fleetStatusViaPrometheus(prometheus.url, {wanted})
  t.like(now.nodes[0], {wanted: 'foo/channels/canary', desired: 'foo/tags/1.5.0', lastResolved: 'foo/tags/1.4.0', applied: 'foo/tags/1.4.0', onWanted: false})
  t.like(now, {ok: false, offWanted: ['web1'], wantedFrom: {from: 'index', source: wanted.source, version: 7, signedBy: 'abc'}})
  t.like((await fleetStatusViaPrometheus(prometheus.url, {wanted: {...wanted, index: index('1.4.0')}})).nodes[0], {desired: 'foo/tags/1.4.0', onWanted: true})
})

for (const [name, value, why] of [
  ['last_attempt_timestamp_seconds', '1e20', 'is not a time (seconds since 1970)'],
  ['last_attempt_timestamp_seconds', 'NaN', 'is not a time (seconds since 1970)'],
  ['healthy_since_timestamp_seconds', '-Inf', 'is not a time (seconds since 1970)'],
  ['last_run_success', '0.5', 'is not 0 or 1'],
  ['last_attempt_exit_code', '1e20', 'is not an exit code (0-255)'],
] as const) {
  test(`a ${name} of ${value} is 69 naming the series and the value, never a verdict made of it`, async (t) => {
    const prometheus = await fakePrometheus(t, (query) => ({
      resultType: 'vector',
      result: query.startsWith('{__name__=~') ? [...current().filter((s) => s.metric.__name__ !== `localpuppet_${name}`), {...sample(name, {}, 0), value: [NOW, value]}] : [],
    }))
    const error = await t.throwsAsync(readPromFleet(prometheus.url), {instanceOf: FleetUnavailableError})
    t.true(error!.message.endsWith(`series localpuppet_${name}{instance="web1:9100", job="localpuppet"}: value "${value}" ${why}`), error!.message)
  })
}

test('a node whose desired-release labels left its app or channel empty is still counted by the channel its input names', async (t) => {
  const prometheus = await fakePrometheus(t, (query) => ({
    resultType: 'vector',
    result: query.startsWith('{__name__=~')
      ? [
          ...current(),
          sample('desired_release_info', {node: 'canary2', app: '', channel: '', ref: 'foo/channels/canary', release: '', input: 'repository'}, 1, 'canary2:9100'),
          sample('last_attempt_timestamp_seconds', {}, NOW - 60, 'canary2:9100'),
          sample('last_attempt_exit_code', {state: 'refused', release: ''}, 65, 'canary2:9100'),
        ]
      : [],
  }))
  t.like((await readPromFleet(prometheus.url)).nodes.find((node) => node.node === 'canary2'), {app: 'foo', channel: 'canary', applied: null})
})

test("the URL's credentials are in no result: the fleet's url and where its nodes came from", async (t) => {
  const prometheus = await fakePrometheus(t, (query) => ({resultType: 'vector', result: query.startsWith('{__name__=~') ? current() : []}))
  const url = prometheus.url.replace('http://', 'http://ops:s3cret@')
  t.is((await readPromFleet(url)).url, `${prometheus.url}/`)
  t.false(JSON.stringify(await fleetStatusViaPrometheus(url)).includes('s3cret'))
})

test('an answer naming more nodes than a fleet view keeps is 69 naming the query, not memory without end', async (t) => {
  const result = Array.from({length: MAX_NODES + 1}, (_, i) => ({metric: {__name__: 'localpuppet_run_in_progress', instance: `n${i}`}, value: [NOW, '0'] as [number, string]}))
  const prometheus = await fakePrometheus(t, (query) => ({resultType: 'vector', result: query.startsWith('{__name__=~') ? result : []}))
  const error = await t.throwsAsync(readPromFleet(prometheus.url), {instanceOf: FleetUnavailableError})
  t.true(error!.message.startsWith(`prometheus ${prometheus.url}: query {__name__=~"localpuppet_(`), error!.message)
  t.true(error!.message.endsWith(`: more than ${MAX_NODES} nodes (scrape targets) in the answer`), error!.message)
})

test('labels a fleet view keeps are bounded in all: long ones from a few nodes are 69 naming the query, not memory without end', async (t) => {
  const long = 'n'.repeat(1_000_000)
  const count = Math.ceil(MAX_KEPT_CHARS / long.length) + 1
  const body = JSON.stringify({
    status: 'success',
    data: {resultType: 'vector', result: Array.from({length: count}, (_, i) => ({metric: {__name__: 'localpuppet_desired_release_info', instance: `n${i}`, node: long}, value: [NOW, '1']}))},
  })
  const server = await testServer('/nonexistent', async (req, res) => {
    for await (const _ of req);
    res.end(body)
    return true
  })
  t.teardown(() => server.close())
  const error = await t.throwsAsync(readPromFleet(server.url), {instanceOf: FleetUnavailableError})
  t.true(error!.message.endsWith(`: labels of more than ${MAX_KEPT_CHARS} characters in all`), error!.message.slice(0, 300))
})

test('node names that collide behind one scrape target are bounded too: long ones are 69, not memory without end', async (t) => {
  const long = 'n'.repeat(1_000_000)
  const count = Math.ceil(MAX_KEPT_CHARS / long.length) + 1
  const result = Array.from({length: count}, (_, i) => ({metric: {__name__: 'localpuppet_desired_release_info', instance: 'host:9100', node: `${i}${long}`}, value: [NOW, '1'] as [number, string]}))
  const prometheus = await fakePrometheus(t, (query) => ({resultType: 'vector', result: query.startsWith('{__name__=~') ? result : []}))
  const error = await t.throwsAsync(readPromFleet(prometheus.url), {instanceOf: FleetUnavailableError})
  t.true(error!.message.endsWith(`: labels of more than ${MAX_KEPT_CHARS} characters in all`), error!.message.slice(0, 300))
})

test('a node whose series of one metric disagree (a succeeded and a failed state, a success of 1 and of 0) is not healthy whichever comes first, and fleet status says why', async (t) => {
  const {channelHealth} = await import('../../../../src/lib/fleet/channel-health.js')
  const canary = (order: 'succeeded first' | 'failed first') => {
    const succeeded = [sample('last_attempt_exit_code', {state: 'succeeded', release: 'foo/tags/1.4.0'}, 0), sample('last_run_success', {}, 1)]
    const failed = [sample('last_attempt_exit_code', {state: 'failed', release: 'foo/tags/1.4.0'}, 6), sample('last_run_success', {scraped_by: 'old'}, 0)]
    return [
      sample('desired_release_info', desired('foo/tags/1.4.0'), 1),
      sample('applied_release_info', {app: 'foo', release: 'foo/tags/1.4.0'}, 1),
      sample('last_attempt_timestamp_seconds', {}, NOW - 60),
      sample('healthy_since_timestamp_seconds', {}, NOW - 7200),
      ...(order === 'succeeded first' ? [...succeeded, ...failed] : [...failed, ...succeeded]),
    ]
  }

  for (const order of ['succeeded first', 'failed first'] as const) {
    const prometheus = await fakePrometheus(t, (query) => ({resultType: 'vector', result: query.startsWith('{__name__=~') ? canary(order) : []}))
    const health = await channelHealth(prometheus.url, {app: 'foo', release: 'foo/tags/1.4.0', channel: 'canary', forMs: 0, minNodes: 1})
    t.false(health.ok, order)
    t.like(health.nodes[0], {node: 'web1', state: 'failed', reason: 'its metrics disagree: two series of localpuppet_last_attempt_exit_code, 0 and 6'}, order)
    const status = await fleetStatusViaPrometheus(prometheus.url)
    t.like(status.nodes[0], {node: 'web1', message: 'its metrics disagree: two series of localpuppet_last_attempt_exit_code, 0 and 6'}, order)
  }
})

test('issue 35: a `node` (or app, channel, release) label on the scrape target does not rename the fleet: the node\'s own, renamed exported_* by Prometheus, is read', async (t) => {
  // Prometheus' default (honor_labels: false) with `labels: {node: host-a, channel: ops}` on web1's target: its own become exported_*.
  const relabelled = (series: Series): Series => {
    const metric: Record<string, string> = {...series.metric, node: 'host-a', channel: 'ops'}
    for (const name of ['node', 'channel'] as const) if (Object.hasOwn(series.metric, name)) metric[`exported_${name}`] = series.metric[name]
    return {...series, metric}
  }

  const prometheus = await fakePrometheus(t, (query) => ({
    resultType: 'vector',
    result: query.startsWith('{__name__=~') ? [...current().map(relabelled), sample('desired_release_info', {...desired('foo/tags/1.4.0', 'web2:9100', 'web2')}, 1, 'web2:9100')] : [],
  }))
  const fleet = await readPromFleet(prometheus.url)
  t.deepEqual(fleet.nodes.map((node) => node.node), ['web1', 'web2'])
  t.like(fleet.nodes[0], {node: 'web1', channel: 'canary', desired: 'foo/tags/1.4.0', instance: 'web1:9100'})
  // A node's own `exported_instance` is never read: the scrape's target is who it is.
  const spoofed = await fakePrometheus(t, (query) => ({
    resultType: 'vector',
    result: query.startsWith('{__name__=~') ? current().map((series) => ({...series, metric: {...series.metric, exported_instance: 'web9:9100'}})) : [],
  }))
  t.like((await readPromFleet(spoofed.url)).nodes[0], {node: 'web1', instance: 'web1:9100'})
})

test("several nodes' metrics behind one node exporter (their series collide) are named in one note that says what to check, and fleet status is not ok", async (t) => {
  const {channelHealth} = await import('../../../../src/lib/fleet/channel-health.js')
  const {renderFleetStatus} = await import('../../../../src/cli/render/rollout-text.js')
  // As the exporter serves it: every node's desired-release series (the only one with a node label), one file's others.
  const collided = [sample('desired_release_info', desired('foo/tags/1.4.0', 'host:9100', 'web2'), 1, 'host:9100'), sample('desired_release_info', desired('foo/tags/1.4.0', 'host:9100', 'web3'), 1, 'host:9100'), ...current().slice(0).map((series) => ({...series, metric: {...series.metric, instance: 'host:9100'}}))]
  const prometheus = await fakePrometheus(t, (query) => ({resultType: 'vector', result: query.startsWith('{__name__=~') ? collided : []}))
  const status = await fleetStatusViaPrometheus(prometheus.url)
  t.is(status.nodes.length, 1)
  t.regex(status.nodes[0].message ?? '', /^the metrics of 3 nodes \(web2, web3, web1\) collide behind one scrape target host:9100: .*own node exporter/)
  t.false(status.ok)
  t.regex(renderFleetStatus(status), /Not on their wanted release: web2/)
  const health = await channelHealth(prometheus.url, {app: 'foo', release: 'foo/tags/1.4.0', channel: 'canary', forMs: 0, minNodes: 1})
  t.false(health.ok)
  t.like(health.nodes[0], {state: 'failed', reason: status.nodes[0].message!})
})

test('a node seen under an old scrape target too is one node: the target reporting now wins, in fleet status and in the promotion gate', async (t) => {
  const {channelHealth} = await import('../../../../src/lib/fleet/channel-health.js')
  const healthy = [
    sample('desired_release_info', desired('foo/tags/1.4.0', 'new:9100'), 1, 'new:9100'),
    sample('applied_release_info', {app: 'foo', release: 'foo/tags/1.4.0'}, 1, 'new:9100'),
    sample('last_attempt_exit_code', {state: 'succeeded', release: 'foo/tags/1.4.0'}, 0, 'new:9100'),
    sample('last_attempt_timestamp_seconds', {}, NOW - 60, 'new:9100'),
    sample('healthy_since_timestamp_seconds', {}, NOW - 600, 'new:9100'),
    sample('last_run_success', {}, 1, 'new:9100'),
  ]
  const prometheus = await fakePrometheus(t, (query) => {
    if (query.startsWith('{__name__=~')) return {resultType: 'vector', result: healthy}
    // web1 as the old target last reported it, 1.3.0, its newest attempt before the move.
    if (query.startsWith('last_over_time(localpuppet_desired')) return {resultType: 'vector', result: [sample('desired_release_info', desired('foo/tags/1.3.0', 'old:9100'), 1, 'old:9100'), healthy[0]]}
    if (query.startsWith('last_over_time(localpuppet_last_attempt')) return {resultType: 'vector', result: [sample('last_attempt_timestamp_seconds', {}, NOW - 140, 'old:9100')]}
    return {resultType: 'matrix', result: []}
  })
  const fleet = await readPromFleet(prometheus.url)
  t.is(fleet.nodes.length, 1)
  t.like(fleet.nodes[0], {node: 'web1', instance: 'new:9100', stopped: false, alsoSeenAs: ['old:9100']})
  const status = await fleetStatusViaPrometheus(prometheus.url)
  t.deepEqual(status.noAnswer, [])
  t.true(status.ok)
  const {renderFleetStatus} = await import('../../../../src/cli/render/rollout-text.js')
  t.regex(renderFleetStatus(status), /^web1 .*also seen as old:9100 \(older: ignored\)$/m)
  const health = await channelHealth(prometheus.url, {app: 'foo', release: 'foo/tags/1.4.0', channel: 'canary', forMs: 0, minNodes: 1})
  t.true(health.ok, health.why)
  t.is(health.nodes.length, 1)
})

test('a live target taking the name of a node that stopped on another channel does not hide it from that channel\'s gate', async (t) => {
  const {channelHealth} = await import('../../../../src/lib/fleet/channel-health.js')
  const healthyAt = (instance: string, node: string, follows: string) => [
    sample('desired_release_info', {...desired('foo/tags/1.4.0', instance, node), ref: `foo/channels/${follows}`, channel: follows}, 1, instance),
    sample('applied_release_info', {app: 'foo', release: 'foo/tags/1.4.0'}, 1, instance),
    sample('last_attempt_exit_code', {state: 'succeeded', release: 'foo/tags/1.4.0'}, 0, instance),
    sample('last_attempt_timestamp_seconds', {}, NOW - 60, instance),
    sample('healthy_since_timestamp_seconds', {}, NOW - 600, instance),
    sample('last_run_success', {}, 1, instance),
  ]
  // web1 (canary) stopped on 1.4.0; another machine calling itself web1 reports now, on stable; web3 is healthy on canary.
  const live = [...healthyAt('other:9100', 'web1', 'stable'), ...healthyAt('web3:9100', 'web3', 'canary')]
  const prometheus = await fakePrometheus(t, (query) => {
    if (query.startsWith('{__name__=~')) return {resultType: 'vector', result: live}
    if (query.startsWith('last_over_time(localpuppet_desired')) return {resultType: 'vector', result: [sample('desired_release_info', desired('foo/tags/1.4.0', 'web1:9100'), 1, 'web1:9100'), live[0], live[6]]}
    if (query.startsWith('last_over_time(localpuppet_last_attempt')) return {resultType: 'vector', result: [sample('last_attempt_timestamp_seconds', {}, NOW - 900, 'web1:9100')]}
    return {resultType: 'matrix', result: []}
  })
  const health = await channelHealth(prometheus.url, {app: 'foo', release: 'foo/tags/1.4.0', channel: 'canary', forMs: 0, minNodes: 1})
  t.false(health.ok, health.why)
  t.deepEqual(health.nodes.map((node) => [node.node, node.instance, node.state]), [['web1', 'web1:9100', 'stopped reporting'], ['web3', 'web3:9100', 'healthy']])
})

test('two live scrape targets reporting one node name (two machines with one node_name) are not hidden behind the fresher: the node is not believed, fleet status is not ok, the gate refuses naming both', async (t) => {
  const {channelHealth} = await import('../../../../src/lib/fleet/channel-health.js')
  const healthyAt = (instance: string, at: number) => [
    sample('desired_release_info', desired('foo/tags/1.4.0', instance), 1, instance),
    sample('applied_release_info', {app: 'foo', release: 'foo/tags/1.4.0'}, 1, instance),
    sample('last_attempt_exit_code', {state: 'succeeded', release: 'foo/tags/1.4.0'}, 0, instance),
    sample('last_attempt_timestamp_seconds', {}, at, instance),
    sample('healthy_since_timestamp_seconds', {}, NOW - 600, instance),
    sample('last_run_success', {}, 1, instance),
  ]
  const prometheus = await fakePrometheus(t, (query) => ({resultType: 'vector', result: query.startsWith('{__name__=~') ? [...healthyAt('a:9100', NOW - 60), ...healthyAt('b:9100', NOW - 120)] : []}))
  const status = await fleetStatusViaPrometheus(prometheus.url)
  t.is(status.nodes.length, 1)
  t.regex(status.nodes[0].message ?? '', /^node web1 is reported by 2 live scrape targets at once \(a:9100, b:9100\): two machines with one node_name\?/)
  t.false(status.ok)
  const health = await channelHealth(prometheus.url, {app: 'foo', release: 'foo/tags/1.4.0', channel: 'canary', forMs: 0, minNodes: 1})
  t.false(health.ok)
  t.regex(health.nodes[0].reason ?? '', /2 live scrape targets at once/)
})

test('a node that stopped reporting shuts the gate with a refusal that says how long it counts and where retiring one is told', async (t) => {
  const {channelHealth} = await import('../../../../src/lib/fleet/channel-health.js')
  const prometheus = await fakePrometheus(t, (query) => {
    if (query.startsWith('last_over_time(localpuppet_desired')) return {resultType: 'vector', result: [sample('desired_release_info', desired('foo/tags/1.4.0'), 1)]}
    if (query.startsWith('last_over_time(localpuppet_last_attempt')) return {resultType: 'vector', result: [sample('last_attempt_timestamp_seconds', {}, NOW - 3600)]}
    return {resultType: query.startsWith('{__name__') ? 'vector' : 'matrix', result: []}
  })
  const health = await channelHealth(prometheus.url, {app: 'foo', release: 'foo/tags/1.4.0', channel: 'canary', forMs: 0, minNodes: 1})
  t.false(health.ok)
  t.is(health.nodes[0].reason, 'its metrics are gone from Prometheus (newest attempt 1h ago; counted for 1d after its last scrape)')
  t.regex(health.why, /web1 \(stopped reporting\); a node that stopped reporting counts for 1d after its last scrape \(to retire one sooner: "Retiring a node" in docs\/fleet-pull\.md\)$/)
  const shorter = await channelHealth(prometheus.url, {app: 'foo', release: 'foo/tags/1.4.0', channel: 'canary', forMs: 0, minNodes: 1, lookbackMs: 6 * 3_600_000})
  t.regex(shorter.why, /counts for 6h after/)
})

test('an empty fleet view says why: no node seen at all, or none of those seen follows --channel (and which they follow)', async (t) => {
  const {renderFleetStatus} = await import('../../../../src/cli/render/rollout-text.js')
  const prometheus = await fakePrometheus(t, (query) => ({resultType: 'vector', result: query.startsWith('{__name__=~') ? current() : []}))
  const stable = await fleetStatusViaPrometheus(prometheus.url, {channel: 'stable'})
  t.false(stable.ok)
  t.is(stable.noNodes, 'no node follows channel stable: of the 1 node seen, by channel: canary = 1')
  t.regex(renderFleetStatus(stable), /^No node listed: no node follows channel stable: of the 1 node seen, by channel: canary = 1$/m)
  t.is((await fleetStatusViaPrometheus(prometheus.url, {channel: 'canary'})).noNodes, undefined)
  const none = await fakePrometheus(t, () => ({resultType: 'vector', result: []}))
  t.regex((await fleetStatusViaPrometheus(none.url)).noNodes ?? '', /^no node has reported within the lookback: check that the nodes write metrics_file/)
})
