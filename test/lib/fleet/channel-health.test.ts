import test from 'ava'

import {UsageError} from '../../../src/lib/errors.js'
import {channelHealth, judgeNode} from '../../../src/lib/fleet/channel-health.js'
import type {PromNode} from '../../../src/lib/fleet/sources/prometheus.js'

const NOW = Date.parse('2026-11-25T12:00:00.000Z')
const ago = (minutes: number) => new Date(NOW - minutes * 60_000).toISOString()
const options = {app: 'foo', release: 'foo/tags/1.1.0', channel: 'canary', forMs: 10 * 60_000, minNodes: 1}
const node = (fields: Partial<PromNode>): PromNode => ({
  node: 'web1',
  instance: '127.0.0.1:9100',
  job: 'localpuppet',
  app: 'foo',
  channel: 'canary',
  wanted: 'foo/channels/canary',
  desired: 'foo/tags/1.1.0',
  applied: 'foo/tags/1.1.0',
  state: 'succeeded',
  release: 'foo/tags/1.1.0',
  at: ago(5),
  noop: false,
  drift: 0,
  disabled: null,
  message: null,
  onWanted: true,
  lastSuccessAt: ago(5),
  healthySince: ago(30),
  lastRunSuccess: true,
  exitCode: 0,
  stopped: false,
  ...fields,
})

test('a node is healthy once it applied the release and every run since succeeded for --for', (t) => {
  t.like(judgeNode(node({}), options, NOW), {state: 'healthy'})
  t.like(judgeNode(node({healthySince: ago(3)}), options, NOW), {state: 'settling', reason: 'healthy on it for 3m of 10m'})
})

test('each way of not being there yet is named', (t) => {
  t.like(judgeNode(node({applied: 'foo/tags/1.0.0', desired: 'foo/tags/1.0.0'}), options, NOW), {state: 'not yet run', reason: 'has applied foo/tags/1.0.0; its channel resolved to foo/tags/1.0.0'})
  t.like(judgeNode(node({applied: 'foo/tags/1.0.0', state: 'failed', lastRunSuccess: false, exitCode: 1}), options, NOW), {state: 'failed', reason: 'newest attempt failed (exit 1) on foo/tags/1.1.0'})
  t.like(judgeNode(node({state: 'refused', exitCode: 65}), options, NOW), {state: 'failed'})
  t.like(judgeNode(node({disabled: 'maintenance'}), options, NOW), {state: 'disabled', reason: 'Puppet is disabled: maintenance'})
  t.like(judgeNode(node({at: ago(180)}), options, NOW), {state: 'stale'})
  t.like(judgeNode(node({stopped: true}), options, NOW), {state: 'stopped reporting'})
})

test("a node whose clock is ahead is not fresh: its newest attempt or its healthy-since in the future is stale", (t) => {
  const ahead = (minutes: number) => new Date(NOW + minutes * 60_000).toISOString()
  t.like(judgeNode(node({at: ahead(60)}), options, NOW), {state: 'stale', reason: "newest attempt 1h ahead of Prometheus' clock (the node's clock is ahead: not believed)"})
  t.like(judgeNode(node({at: ago(5), healthySince: ahead(600)}), options, NOW), {state: 'stale', reason: "healthy since 10h ahead of Prometheus' clock (the node's clock is ahead: not believed)"})
  // Within a minute ahead: a clock NTP keeps, believed.
  t.like(judgeNode(node({at: new Date(NOW + 20_000).toISOString()}), options, NOW), {state: 'healthy'})
})

test('the state label is compared exactly as the metrics write it: any other spelling is not healthy', (t) => {
  for (const state of ['Succeeded', 'succeeded ', 'SUCCEEDED', 'ok', '']) {
    t.like(judgeNode(node({state}), options, NOW), {state: 'failed', reason: `newest attempt in a state the metrics do not name: ${JSON.stringify(state)} (exit 0) on foo/tags/1.1.0`}, state)
  }

  for (const state of ['succeeded', 'skipped', 'busy', 'running']) t.like(judgeNode(node({state}), options, NOW), {state: 'healthy'}, state)
  // No completed run reported: not healthy by default.
  t.like(judgeNode(node({lastRunSuccess: null}), options, NOW), {state: 'not yet run'})
})

test('--require-healthy takes a channel name only (64)', async (t) => {
  for (const channel of ['Canary', 'canary/x', '', 'a b', '\u001b]0;x\u0007']) {
    await t.throwsAsync(channelHealth('http://127.0.0.1:1', {...options, channel}), {instanceOf: UsageError, message: /^--require-healthy ".*": not a channel name/})
  }
})

test("issue 35: a failed node's reason names its run and Puppet's first error, as its metrics say", (t) => {
  const failed = node({state: 'failed', lastRunSuccess: false, exitCode: 1, runId: '20261128T001500.123Z-4f2a', firstError: 'Error: Evaluation Error: broken'})
  t.like(judgeNode(failed, options, NOW), {
    state: 'failed',
    runId: '20261128T001500.123Z-4f2a',
    firstError: 'Error: Evaluation Error: broken',
    reason: 'newest attempt failed (exit 1) on foo/tags/1.1.0, run 20261128T001500.123Z-4f2a: Error: Evaluation Error: broken',
  })
})

// A node's name claimed by a live target hides the target that stopped under it (a move, or another machine taking
// its name): the gate's row names the ignored target, so the operator sees it before promoting.
test('the gate names the other scrape targets a node was seen under, healthy or not', (t) => {
  t.like(judgeNode(node({alsoSeenAs: ['10.0.0.9:9100']}), options, NOW), {state: 'healthy', reason: 'healthy on it for 30m; also seen as 10.0.0.9:9100 (older: ignored)', alsoSeenAs: ['10.0.0.9:9100']})
  t.like(judgeNode(node({alsoSeenAs: ['a:1', 'b:2'], healthySince: ago(3)}), options, NOW), {state: 'settling', reason: 'healthy on it for 3m of 10m; also seen as a:1, b:2 (older: ignored)'})
  t.false('alsoSeenAs' in judgeNode(node({}), options, NOW))
})
