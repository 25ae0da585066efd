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

test("issue 35: the index's expiry is a metric: the newest a --fetch read, kept through a fallback, and an expired one's date when it was refused", async (t) => {
  const {checkNode} = await import('../../../src/lib/metrics/nagios-check.js')
  const fetched = (expires: string | null, fallback = false) => ({source: 'https://repo.example.com/', releases: [], ...(fallback ? {fallback, error: 'unreachable'} : {}), ...(expires ? {indexExpires: expires} : {})})
  const good = (minute: number, fetch: RunRecord['fetch']) => record(minute, {state: 'succeeded', ref: 'foo@^1', release: 'foo/tags/1.0.0', exitCode: 0, fetch})
  t.notRegex(text([good(0, null)]), /^localpuppet_index_expiry_timestamp_seconds/m, 'absent before any index was read')
  const soon = '2026-11-26T12:00:00.000Z'
  const records = [good(0, fetched(soon)), good(30, fetched(null, true))]
  t.regex(text(records), new RegExp(`^localpuppet_index_expiry_timestamp_seconds ${Date.parse(soon) / 1000}$`, 'm'), 'an unreachable source keeps the expiry last read')
  // status --check: WARNING a day ahead (while runs succeed), CRITICAL once expired.
  const ahead = checkNode(state(records), null, 7_200_000, 21_600_000, at(31))
  t.is(ahead.status, 'WARNING', ahead.line)
  t.regex(ahead.line, /index of https:\/\/repo\.example\.com\/ expires at 2026-11-26T12:00:00\.000Z, in 23h\d+m: then nodes take nothing new from it; re-sign it/)
  t.is(checkNode(state([good(0, fetched('2027-01-01T00:00:00.000Z'))]), null, 7_200_000, 21_600_000, at(31)).status, 'OK')
  const expired = [good(0, fetched(soon)), good(1500, fetched(soon, true))]
  t.regex(text(expired), new RegExp(`^localpuppet_index_expiry_timestamp_seconds ${Date.parse(soon) / 1000}$`, 'm'))
  t.regex(text(expired), /^localpuppet_fetch_failed 1$/m)
  const after = checkNode(state(expired), null, 7_200_000, 21_600_000, at(1501))
  t.is(after.status, 'CRITICAL', after.line)
  t.regex(after.line, /expired at 2026-11-26T12:00:00\.000Z: nodes take nothing new from it \(they enforce what they have installed\)/)
})

test("issue 35: the newest attempt's run id and first error, one line of at most 300 characters, in one info series", (t) => {
  const failed = text([
    record(0, {state: 'succeeded', release: 'foo/tags/1.4.0', exitCode: 0}),
    record(30, {state: 'failed', release: 'foo/tags/1.5.0', exitCode: 1, error: 'puppet exited 1', firstError: `Error: Evaluation Error: broken\n\u001B]0;pwned\u0007 ${'x'.repeat(400)}`}),
  ])
  const line = /^localpuppet_last_attempt_info\{run_id="run30",first_error="(.*)"\} 1$/m.exec(failed)
  t.truthy(line, failed)
  t.true(line![1].startsWith('Error: Evaluation Error: broken\\\\n\\\\e]0;pwned\\\\u0007 xxx'), line![1])
  t.true(line![1].endsWith('x…') && line![1].split('x').length - 1 < 300, 'cut at 300 characters')
  t.is(failed.match(/^localpuppet_last_attempt_info\{/gm)?.length, 1, 'one series, of the newest attempt')
  // A refusal: localpuppet's own reason; a success: no error.
  t.regex(text([record(0, {state: 'refused', exitCode: 65, error: 'input.yaml: unknown class nc4sit'})]), /^localpuppet_last_attempt_info\{run_id="run0",first_error="input\.yaml: unknown class nc4sit"\} 1$/m)
  t.regex(text([record(0, {state: 'succeeded', exitCode: 0})]), /^localpuppet_last_attempt_info\{run_id="run0",first_error=""\} 1$/m)
})

test("a node reading its own document in place of the index: the document's expiry is the expiry metric and status --check's warning names it", async (t) => {
  const {checkNode} = await import('../../../src/lib/metrics/nagios-check.js')
  const soon = '2026-11-26T12:00:00.000Z'
  const fetch = {source: 'https://repo.example.com/', releases: [], nodeDocument: {version: 1_795_838_786_467, expires: soon}}
  const records = [record(0, {state: 'succeeded', ref: 'foo@^1', release: 'foo/tags/1.0.0', exitCode: 0, fetch})]
  t.regex(text(records), new RegExp(`^localpuppet_index_expiry_timestamp_seconds ${Date.parse(soon) / 1000}$`, 'm'))
  const ahead = checkNode(state(records), null, 7_200_000, 21_600_000, at(31))
  t.is(ahead.status, 'WARNING', ahead.line)
  t.regex(ahead.line, /this node's document of https:\/\/repo\.example\.com\/ expires at 2026-11-26T12:00:00\.000Z/)
})
