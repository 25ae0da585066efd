import test from 'ava'

import {healthySince} from '../../../src/lib/metrics/node-metrics.js'
import type {RunRecord} from '../../../src/lib/state/run-record.js'

const record = (state: RunRecord['state'], release: string, finishedAt: string, noop = false) => ({state, release, finishedAt, noop}) as RunRecord

test('healthy since: the first run of the newest streak of successes on the applied release', (t) => {
  const records = [
    record('succeeded', 'foo/tags/1.0.0', 't1'),
    record('succeeded', 'foo/tags/1.1.0', 't2'),
    record('refused', 'foo/tags/1.1.0', 't3'),
    record('succeeded', 'foo/tags/1.1.0', 't4', true),
    record('skipped', 'foo/tags/1.1.0', 't5'),
  ]
  t.is(healthySince(records, 'foo/tags/1.1.0'), 't2', 'refusals and noop runs neither break nor start it')
  t.is(healthySince([...records, record('failed', 'foo/tags/1.1.0', 't6')], 'foo/tags/1.1.0'), null, 'the newest completed run failed')
  t.is(healthySince([...records, record('failed', 'foo/tags/1.1.0', 't6'), record('succeeded', 'foo/tags/1.1.0', 't7')], 'foo/tags/1.1.0'), 't7')
  t.is(healthySince(records, null), null)
})
