import type {ExecutionContext} from 'ava'
import test from 'ava'

import {FleetUnavailableError} from '../../../../src/lib/errors.js'
import {channelHealth} from '../../../../src/lib/fleet/channel-health.js'
import {readPuppetDbFleet} from '../../../../src/lib/fleet/sources/puppetdb.js'
import {head, hostileServer, pour} from '../../../helpers/hostile-server.js'
import {testServer} from '../../../helpers/repository.js'

/*
 * The fleet as PuppetDB's reports and facts say, and PuppetDB as hostile input: a stand-in
 * answering PQL queries by their entity.
 */

const NOW = Math.floor(Date.now() / 60_000) * 60_000
const at = (minutesAgo: number) => new Date(NOW - minutesAgo * 60_000).toISOString()
const report = (certname: string, release: string, minutesAgo: number, status = 'unchanged', noop = false) => ({
  certname,
  code_id: `${release}@sha256:${'a'.repeat(64)}`,
  status,
  noop,
  job_id: `run-${certname}-${minutesAgo}`,
  start_time: at(minutesAgo),
  end_time: at(minutesAgo - 1),
})

async function puppetdb(t: ExecutionContext, answers: {reports: unknown; failed?: unknown; facts?: unknown; metrics?: unknown}) {
  const server = await testServer('/nonexistent', async (req, res) => {
    let body = ''
    for await (const chunk of req) body += chunk
    const query = (JSON.parse(body) as {query: string}).query
    const answer = query.startsWith('facts') ? (answers.facts ?? []) : query.includes('logs') ? (answers.failed ?? []) : query.includes('metrics') ? (answers.metrics ?? []) : answers.reports
    res.writeHead(200, {'content-type': 'application/json'})
    res.end(typeof answer === 'string' ? answer : JSON.stringify(answer))
    return true
  })
  t.teardown(() => server.close())
  return {url: server.url, ca: null, cert: null, key: null}
}

const fact = (certname: string, release: string) => ({certname, value: {ref: 'foo/channels/canary', release}})

test('applied is the newest report neither failed nor noop; healthy since the oldest success of its unbroken run; a failed node says Puppet\'s first error', async (t) => {
  const config = await puppetdb(t, {
    reports: [
      report('web1', 'foo/tags/1.3.0', 300),
      report('web1', 'foo/tags/1.4.0', 120, 'changed'),
      report('web1', 'foo/tags/1.4.0', 60),
      report('web1', 'foo/tags/1.5.0', 30, 'changed', true),
      report('web2', 'foo/tags/1.4.0', 90),
      report('web2', 'foo/tags/1.4.0', 10, 'failed'),
    ],
    failed: [{certname: 'web2', logs: {data: [{level: 'notice', message: 'hi'}, {level: 'err', message: 'Evaluation Error: boom'}, {level: 'err', message: 'second'}]}}],
    facts: [fact('web1', 'foo/tags/1.4.0'), fact('web2', 'foo/tags/1.4.0')],
  })
  const fleet = await readPuppetDbFleet(config, {now: NOW})
  const [web1, web2] = fleet.nodes
  t.like(web1, {node: 'web1', app: 'foo', channel: 'canary', applied: 'foo/tags/1.4.0', release: 'foo/tags/1.5.0', noop: true, healthySince: at(119), lastRunSuccess: true, onWanted: true})
  t.like(web2, {node: 'web2', applied: 'foo/tags/1.4.0', state: 'failed', message: 'Evaluation Error: boom', healthySince: null, lastRunSuccess: false})
  t.is(web2.runId, 'run-web2-10', "the newest report's job_id: which run failed")
  const health = await channelHealth(config, {app: 'foo', release: 'foo/tags/1.4.0', channel: 'canary', forMs: 0, minNodes: 1, staleAfterMs: 10 * 86_400_000})
  t.false(health.ok)
  t.is(health.source, 'PuppetDB')
  t.regex(health.nodes.find((node) => node.node === 'web2')!.reason, /newest attempt failed on foo\/tags\/1\.4\.0, run run-web2-10: Evaluation Error: boom/)
})

test("drift is the newest report's corrective changes, as Prometheus has it (unknown after a noop run or without the metric); a count that is none is refused (69)", async (t) => {
  const metrics = (certname: string, value: unknown) => ({certname, metrics: {data: [{category: 'resources', name: 'changed', value: 3}, {category: 'resources', name: 'corrective_change', value}]}})
  const answers = {
    reports: [report('web1', 'foo/tags/1.4.0', 30, 'changed'), report('web2', 'foo/tags/1.4.0', 30), report('web3', 'foo/tags/1.4.0', 30)],
    metrics: [metrics('web1', 2), metrics('web2', 0), {certname: 'web3', metrics: {data: [{category: 'time', name: 'total', value: 1}]}}],
    facts: [fact('web1', 'foo/tags/1.4.0'), fact('web2', 'foo/tags/1.4.0'), fact('web3', 'foo/tags/1.4.0')],
  }
  const fleet = await readPuppetDbFleet(await puppetdb(t, answers), {now: NOW})
  t.deepEqual(fleet.nodes.map((node) => [node.node, node.drift]), [['web1', 2], ['web2', 0], ['web3', null]])
  const lying = await puppetdb(t, {...answers, metrics: [metrics('web1', -1)]})
  await t.throwsAsync(readPuppetDbFleet(lying, {now: NOW}), {instanceOf: FleetUnavailableError, message: /web1: a corrective_change that is not a count of resources: -1/})
})

test('a row that is not a report is refused (69), naming PuppetDB and what came', async (t) => {
  const config = await puppetdb(t, {reports: [{certname: 'web1', status: 'changed', start_time: 'yesterday', end_time: 7}]})
  const error = await t.throwsAsync(readPuppetDbFleet(config, {now: NOW}), {instanceOf: FleetUnavailableError})
  t.regex(error!.message, /^puppetdb http:\/\/127\.0\.0\.1:\d+\/?: reports: a row that is not a report/)
})

test('an answer that is not JSON, or too large, is 69; a silent PuppetDB is 69 once the deadline passed', async (t) => {
  const garbage = await puppetdb(t, {reports: '<html>proxy error</html>'})
  await t.throwsAsync(readPuppetDbFleet(garbage, {now: NOW}), {instanceOf: FleetUnavailableError, message: /not PuppetDB's answer \(not JSON\)/})
  const huge = await hostileServer((_path, socket) => {
    socket.write(head(200, {'content-type': 'application/json'}))
    pour(socket)
  })
  t.teardown(() => huge.close())
  const config = {url: huge.url, ca: null, cert: null, key: null}
  const {PuppetDbClient} = await import('../../../../src/lib/puppetdb/client.js')
  await t.throwsAsync(new PuppetDbClient(config, {maxBytes: 1024 * 1024}).query('nodes {}'), {instanceOf: FleetUnavailableError, message: /answer larger than 1048576 bytes/})
  const silent = await hostileServer(() => {})
  t.teardown(() => silent.close())
  await t.throwsAsync(readPuppetDbFleet({url: silent.url, ca: null, cert: null, key: null}, {now: NOW, deadlineMs: 1000, timeoutMs: 500}), {instanceOf: FleetUnavailableError, message: /no whole answer within 1 s|timeout/i})
})

test('a PuppetDB that drips its answer a byte at a time is 69 once the rate floor or the deadline is passed, not a wait without end', async (t) => {
  const dripping = await hostileServer((_path, socket) => {
    socket.write(head(200, {'content-type': 'application/json'}))
    const timer = setInterval(() => socket.write(' '), 100)
    socket.on('close', () => clearInterval(timer))
  })
  t.teardown(() => dripping.close())
  await t.throwsAsync(readPuppetDbFleet({url: dripping.url, ca: null, cert: null, key: null}, {now: NOW, deadlineMs: 3000, timeoutMs: 1000}), {instanceOf: FleetUnavailableError})
})

test("a code_id that is not localpuppet's names no release: never guessed at", async (t) => {
  const config = await puppetdb(t, {reports: [{...report('web1', 'foo/tags/1.4.0', 10), code_id: 'production-abc123'}]})
  const [web1] = (await readPuppetDbFleet(config, {now: NOW})).nodes
  t.like(web1, {applied: null, release: null, state: 'succeeded'})
})

test("a report whose status or times are not PuppetDB's (a status it never writes, times as numbers) is refused (69), never judged a success", async (t) => {
  for (const lie of [{...report('web1', 'foo/tags/1.4.0', 5), status: 'ok'}, {...report('web1', 'foo/tags/1.4.0', 5), start_time: 0, end_time: 1}]) {
    const config = await puppetdb(t, {reports: [lie], facts: [fact('web1', 'foo/tags/1.4.0')]})
    const error = await t.throwsAsync(readPuppetDbFleet(config, {now: NOW}), {instanceOf: FleetUnavailableError})
    t.regex(error!.message, /: reports: a row that is not a report/)
  }
})

/** A PuppetDB answering the query that names `field` with an endless list, as fast as it is read; the others with web1's failed report and fact. */
async function flooding(t: ExecutionContext, field: string) {
  const server = await testServer('/nonexistent', async (req, res) => {
    let body = ''
    for await (const chunk of req) body += chunk
    res.writeHead(200, {'content-type': 'application/json'})
    if (body.includes(field)) {
      const chunk = Buffer.alloc(1024 * 1024, 32)
      res.write('[')
      const pump = () => {
        while (!res.destroyed && res.write(chunk));
        if (!res.destroyed) res.once('drain', pump)
      }

      pump()
      return true
    }

    res.end(JSON.stringify(body.includes('facts') ? [fact('web1', 'foo/tags/1.4.0')] : [report('web1', 'foo/tags/1.4.0', 5, 'failed')]))
    return true
  })
  t.teardown(() => server.close())
  return readPuppetDbFleet({url: server.url, ca: null, cert: null, key: null}, {now: NOW})
}

test("failed reports' logs too large to read (a fleet failing at once, each report thousands of lines) cost the first errors, not the fleet's status: each failed node says why its error is missing", async (t) => {
  const fleet = await flooding(t, 'logs')
  t.like(fleet.nodes[0], {node: 'web1', state: 'failed'})
  t.regex(fleet.nodes[0].message ?? '', /Puppet's first error not read: .*larger than/)
})

test("the newest reports' metrics too large to read (a fleet of tens of thousands) cost the drift column, not the fleet's status", async (t) => {
  const fleet = await flooding(t, 'metrics')
  t.like(fleet.nodes[0], {node: 'web1', state: 'failed', drift: null})
})

test('an empty fleet view says why in PuppetDB\'s terms: no report within the lookback, or none of the nodes follows --channel', async (t) => {
  const {fleetStatusViaPuppetDb} = await import('../../../../src/lib/fleet/sources/puppetdb.js')
  const empty = await puppetdb(t, {reports: []})
  t.is((await fleetStatusViaPuppetDb(empty, {now: NOW})).noNodes, "no node has reported within the lookback: check that the nodes' Puppet reports reach PuppetDB")
  const canary = await puppetdb(t, {reports: [report('web1', 'foo/tags/1.4.0', 60)], facts: [fact('web1', 'foo/tags/1.4.0')]})
  t.is((await fleetStatusViaPuppetDb(canary, {now: NOW, channel: 'stable'})).noNodes, 'no node follows channel stable: of the 1 node seen, by channel: canary = 1')
})
