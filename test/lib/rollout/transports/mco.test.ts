import {writeFile} from 'node:fs/promises'

import test from 'ava'

import {FleetUnavailableError} from '../../../../src/lib/errors.js'
import {McoTransport} from '../../../../src/lib/rollout/transports/mco.js'
import {rolloutSettings} from '../../../../src/lib/rollout/settings.js'
import {fakeMco, reply} from '../../../helpers/fake-mco.js'

test('a start addresses exactly the nodes asked (a nodes file, no broadcast) and believes only their first reply', async (t) => {
  const {transport, args} = await fakeMco(t, [
    reply('web1', {run_id: '20261125T120000.000Z-0001', state: 'running', release: 'foo/tags/1.5.0'}),
    reply('web1', {run_id: '20261125T120000.000Z-9999', state: 'running', release: 'foo/tags/1.5.0'}),
    reply('intruder', {run_id: '20261125T120000.000Z-0002', state: 'running', release: 'foo/tags/1.5.0'}),
    reply('web2', {exit_code: 73, error_code: 'locked', message: 'another run is in progress'}, 1, 'another run is in progress'),
    reply('web3', {exit_code: 73, error_code: 'puppet-disabled', message: 'puppet is disabled: ops'}, 1, 'puppet is disabled: ops'),
  ])
  const answers = await transport.start(['web1', 'web2', 'web3'], rolloutSettings({ref: 'foo/tags/1.5.0', fetch: true, save: true, timeout: 600}))
  t.deepEqual(Object.keys(answers).sort(), ['web1', 'web2', 'web3'])
  t.like(answers.web1, {run: {runId: '20261125T120000.000Z-0001'}})
  t.deepEqual(answers.web2, {exitCode: 73, busy: true, message: 'another run is in progress'})
  t.deepEqual(answers.web3, {exitCode: 73, busy: false, message: 'puppet is disabled: ops'})
  const argv = await args()
  t.deepEqual(argv.slice(0, 3), ['rpc', '--config', '/etc/mco.cfg'])
  t.is(argv[3], '--nodes')
  t.false(argv.includes('-W'), 'no discovery filter once the nodes are known')
  t.deepEqual(argv.slice(argv.indexOf('-t'), argv.indexOf('-t') + 2), ['-t', '120'], 'with --fetch a node has 120 s to answer')
  t.deepEqual(argv.slice(argv.indexOf('localpuppet')), ['localpuppet', 'apply', 'app=foo/tags/1.5.0', 'timeout=600', 'fetch=true', 'save=true'])
})

test("discovery uses the operator's filters; a poll reads each node's run, Puppet's own error first", async (t) => {
  const {transport, args} = await fakeMco(t, [
    reply('web1', {run_id: '20261125T120000.000Z-0001', state: 'failed', release: 'foo/tags/1.5.0', error: 'puppet exited 1', first_error: 'Error: Evaluation Error: boom', changed: 0, failed: 1, out_of_sync: 0, duration_ms: 4000}, 1, 'run failed'),
    reply('web2', {pointer: 'foo/tags/1.4.0', applied: 'foo/tags/1.4.0', drift: 2}),
  ])
  const found = await transport.discover()
  t.deepEqual(found.web2, {pointer: 'foo/tags/1.4.0', applied: 'foo/tags/1.4.0', newest: null, disabled: null, drift: 2})
  const argv = await args()
  t.deepEqual(argv.slice(3, 7), ['-W', 'role=web', '--dt', '2'])
  const polled = await transport.poll([{node: 'web1', runId: '20261125T120000.000Z-0001'}], 30_000)
  t.like(polled.web1, {state: 'failed', message: 'Error: Evaluation Error: boom', resources: {changed: 0, failed: 1, outOfSync: 0}, durationMs: 4000})
  const pollArgs = await args()
  t.deepEqual(pollArgs.slice(pollArgs.indexOf('localpuppet')), ['localpuppet', 'status', 'runs=web1=20261125T120000.000Z-0001', 'wait=30'])
})

test('mco that cannot be used is 69 (the rollout stays resumable); no node discovered is an empty answer', async (t) => {
  const broken = await fakeMco(t, 'not json', 1, 'error 2026/11/25: Could not connect to the middleware')
  const error = await t.throwsAsync(broken.transport.survey(['web1']), {instanceOf: FleetUnavailableError})
  t.is(error?.exitCode, 69)
  t.regex(error!.message, /Could not connect to the middleware/)
  const none = await fakeMco(t, '', 1, 'No request sent, we did not discover any nodes.')
  t.deepEqual(await none.transport.discover(), {})
  const missing = new McoTransport({mco: '/nonexistent/mco', connection: [], discovery: [], replyTimeout: null, discoveryTimeout: null})
  await t.throwsAsync(missing.discover(), {instanceOf: FleetUnavailableError, message: /cannot run \/nonexistent\/mco/})
})

test("mco's colours never reach a message: its error line and a reply's status text are stored without them", async (t) => {
  // Written as mco writes them: SGR sequences around the text, on stderr and in statusmsg.
  const coloured = await fakeMco(t, 'not json', 1)
  await writeFile(coloured.transport.options.mco, `#!/bin/sh\nprintf '\\033[31mThe rpc application failed to run: Could not connect\\033[0m\\n' >&2\nexit 1\n`)
  const error = await t.throwsAsync(coloured.transport.survey(['web1']), {instanceOf: FleetUnavailableError})
  t.is(error!.message, 'mco rpc localpuppet status exited 1: The rpc application failed to run: Could not connect')
  const refused = await fakeMco(t, [reply('web1', {exit_code: 73}, 1, '\u001B[33mpuppet is disabled\u001B[0m')])
  const answers = await refused.transport.start(['web1'], rolloutSettings({ref: 'foo/tags/1.5.0'}))
  t.deepEqual(answers.web1, {exitCode: 73, busy: false, message: 'puppet is disabled'})
})

test('a node the survey found silent is asked again with 3 s to answer, not a whole -t', async (t) => {
  const {transport, args} = await fakeMco(t, [reply('web2', {pointer: 'foo/tags/1.4.0', applied: 'foo/tags/1.4.0'})])
  t.deepEqual(Object.keys(await transport.probe(['web1', 'web2'])), ['web2'])
  const argv = await args()
  t.deepEqual(argv.slice(argv.indexOf('-t'), argv.indexOf('-t') + 2), ['-t', '3'])
  t.deepEqual(argv.slice(argv.indexOf('localpuppet')), ['localpuppet', 'status'])
})
