import test from 'ava'

import {renderFleetStatus} from '../../../src/cli/render/rollout-text.js'
import {fleetRow, summarizeFleet} from '../../../src/lib/fleet/fleet-rows.js'

test("issue 35: a node whose newest attempt failed shows its run id and Puppet's first error (escaped, its first line) in NOTE; --json has the run id", (t) => {
  const failed = fleetRow('web2', {
    pointer: 'foo/channels/stable',
    applied: 'foo/tags/1.4.0',
    newest: {runId: '20261128T001500.123Z-4f2a', state: 'failed', release: 'foo/tags/1.5.0', startedAt: '2026-11-28T00:15:00.123Z', message: 'Error: Evaluation Error: broken\u001b[2J at init.pp:2\nsecond line'},
    drift: 0,
  })
  const fine = fleetRow('web1', {pointer: 'foo/channels/stable', applied: 'foo/tags/1.4.0', newest: {runId: '20261128T001400.000Z-0000', state: 'succeeded', release: 'foo/tags/1.4.0', message: null}, drift: 2})
  t.like(failed, {runId: '20261128T001500.123Z-4f2a', state: 'failed'})
  const text = renderFleetStatus(summarizeFleet([fine, failed], 'test'), Date.parse('2026-11-28T00:20:00Z'))
  const row = text.split('\n').find((line) => line.startsWith('web2 '))!
  t.true(row.endsWith('run 20261128T001500.123Z-4f2a: Error: Evaluation Error: broken\\e[2J at init.pp:2'), row)
  t.regex(text.split('\n').find((line) => line.startsWith('web1 '))!, / 2 +-$/, 'DRIFT, and no note (-) for a run that succeeded')
})
