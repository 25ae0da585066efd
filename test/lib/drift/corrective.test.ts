import {writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import test from 'ava'

import {MAX_CORRECTED_NAMES, correctiveChanges} from '../../../src/lib/drift/corrective.js'
import {type RunRecord, newRunRecord} from '../../../src/lib/state/run-record.js'
import {FIXTURES} from '../../helpers/cli.js'
import {tempDir} from '../../helpers/temp.js'

const REPORT = join(FIXTURES, 'puppet-report', 'last_run_report.yaml')
const resources = {changed: 3, failed: 1, outOfSync: 4, total: 12}

let clock = Date.parse('2026-11-28T00:00:00Z')
function record(id: string, fields: Partial<RunRecord>): RunRecord {
  clock += 60_000
  const at = new Date(clock).toISOString()
  return newRunRecord(id, '/dev/null', new Date(clock), {state: 'succeeded', fingerprint: 'sha256:a', finishedAt: at, ...fields})
}

const run = (fields: {fingerprint?: string; noop?: boolean; report?: string} = {}) => ({id: 'now', noop: false, fingerprint: 'sha256:a', resources, report: REPORT, ...fields})

test('same fingerprint as the previous run, which succeeded: what Puppet changed is drift, named', async (t) => {
  const records = [record('r1', {fingerprint: 'sha256:old'}), record('r2', {})]
  t.deepEqual(await correctiveChanges(run(), records), {count: 1, corrected: {since: 'r2', resources: ['File[/srv/example/f]']}})
})

test('not drift: the first run, a changed fingerprint, a previous run that failed, a noop run', async (t) => {
  t.deepEqual(await correctiveChanges(run(), []), {count: 0, corrected: null}, 'first run')
  t.deepEqual(await correctiveChanges(run(), [record('r1', {fingerprint: 'sha256:other'})]), {count: 0, corrected: null}, 'release, input, facts or options changed')
  t.deepEqual(await correctiveChanges(run(), [record('r1', {}), record('r2', {state: 'failed'})]), {count: 0, corrected: null}, 'the previous run failed: it may have left things half done')
  t.deepEqual(await correctiveChanges(run({noop: true}), [record('r1', {})]), {count: undefined, corrected: null}, 'a noop run changes nothing')
})

test('a skip, a refusal and a noop run since do not hide the run that left the system as it is', async (t) => {
  const records = [
    record('r1', {}),
    record('r2', {state: 'skipped'}),
    record('r3', {state: 'refused', fingerprint: null}),
    record('r4', {noop: true, fingerprint: 'sha256:noop'}),
  ]
  t.like(await correctiveChanges(run(), records), {count: 1, corrected: {since: 'r1'}})
})

test("Puppet's report unreadable: the count is unknown, not 0", async (t) => {
  t.deepEqual(await correctiveChanges(run({report: join(FIXTURES, 'no-such-report.yaml')}), [record('r1', {})]), {count: undefined, corrected: null})
})

test('the names kept are bounded (count, and length of each); the count is whole', async (t) => {
  const dir = await tempDir(t)
  const report = join(dir, 'report.yaml')
  const names = Array.from({length: 25}, (_, i) => `File[/srv/${i === 0 ? 'x'.repeat(500) : i}]`)
  const statuses = names.map((name) => `  ${JSON.stringify(name)}:\n    resource_type: File\n    changed: true\n    events:\n    - property: content\n      status: success\n`)
  await writeFile(report, `--- !ruby/object:Puppet::Transaction::Report\nresource_statuses:\n${statuses.join('')}`)
  const {count, corrected} = await correctiveChanges(run({report}), [record('r1', {})])
  t.is(count, 25)
  t.is(corrected?.resources.length, MAX_CORRECTED_NAMES)
  t.is(corrected?.resources[0], `${names[0].slice(0, 200)}…`)
  t.is(corrected?.resources[1], names[1])
})
