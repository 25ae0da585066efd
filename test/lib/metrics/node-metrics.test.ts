import test from 'ava'

import {nodeMetrics} from '../../../src/lib/metrics/node-metrics.js'
import {renderPrometheus} from '../../../src/lib/metrics/prometheus.js'
import type {NodeState} from '../../../src/lib/state/node-state.js'
import {newRunRecord, type RunRecord} from '../../../src/lib/state/run-record.js'

const at = (minute: number) => new Date(Date.parse('2026-11-25T12:00:00.000Z') + minute * 60_000)
function record(minute: number, fields: Partial<RunRecord>): RunRecord {
  const started = at(minute)
  return {...newRunRecord(`run${minute}`, '/dev/null', started, {}), finishedAt: new Date(started.getTime() + 1000).toISOString(), ...fields}
}

function state(records: RunRecord[]): NodeState {
  const newest = records.at(-1) ?? null
  const completed = records.filter((r) => ['succeeded', 'failed', 'error', 'interrupted', 'skipped'].includes(r.state)).at(-1) ?? null
  return {current: newest, lastCompleted: completed, lastSucceeded: records.filter((r) => r.state === 'succeeded').at(-1) ?? null, lastAttempt: newest, records}
}

const text = (records: RunRecord[]) => renderPrometheus(nodeMetrics(state(records), {}, null, {node: 'web1', inputFrom: 'repository'}))

test("a node whose only attempt was refused before resolving a release still names its app and channel (so promote's gate counts it)", (t) => {
  const metrics = text([record(0, {state: 'refused', ref: 'foo/channels/canary', exitCode: 66})])
  t.regex(metrics, /^localpuppet_desired_release_info\{node="web1",app="foo",ref="foo\/channels\/canary",channel="canary",release="",input="repository"\} 1$/m)
  t.regex(metrics, /^localpuppet_last_attempt_exit_code\{state="refused",release=""\} 66$/m)
})

test('a refusal after runs keeps the tag the channel last resolved to; the newest attempt names its own release', (t) => {
  const metrics = text([
    record(0, {state: 'succeeded', ref: 'foo/channels/canary', release: 'foo/tags/1.4.0', exitCode: 0}),
    record(30, {state: 'refused', ref: 'foo/channels/canary', release: null, exitCode: 65}),
  ])
  t.regex(metrics, /^localpuppet_desired_release_info\{[^}]*channel="canary",release="foo\/tags\/1\.4\.0"[^}]*\} 1$/m)
  t.regex(metrics, /^localpuppet_last_attempt_exit_code\{state="refused",release=""\} 65$/m)
  t.regex(metrics, /^localpuppet_release_info\{release="foo\/tags\/1\.4\.0",[^}]*\} 1$/m, 'the newest completed run, as before')

  const disabled = text([
    record(0, {state: 'succeeded', ref: 'foo/channels/canary', release: 'foo/tags/1.4.0', exitCode: 0}),
    record(30, {state: 'refused', ref: 'foo/channels/canary', release: 'foo/tags/1.5.0', exitCode: 73}),
  ])
  t.regex(disabled, /^localpuppet_last_attempt_exit_code\{state="refused",release="foo\/tags\/1\.5\.0"\} 73$/m)
  t.regex(disabled, /^localpuppet_desired_release_info\{[^}]*release="foo\/tags\/1\.5\.0"[^}]*\} 1$/m)
})
