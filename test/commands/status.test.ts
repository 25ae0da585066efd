import {mkdir} from 'node:fs/promises'
import {join} from 'node:path'

import {runCommand} from '@oclif/test'
import test from 'ava'

import {type RunRecord, writeRunRecord} from '../../src/lib/state/run-record.js'
import {runFiles} from '../../src/lib/state/state-dir.js'
import {tempDir} from '../helpers/temp.js'

// runCommand patches stdout globally: these run one at a time.
const root = new URL('../..', import.meta.url).pathname

function record(id: string, fields: Partial<RunRecord> = {}): RunRecord {
  return {
    id, state: 'succeeded', release: 'foo/tags/1.4.0', ref: 'foo@^1.4', modulepath: ['/m/foo/tags/1.4.0'],
    input: {source: 'input.yaml', document: {app: 'foo@^1.4'}}, inputDigest: 'sha256:00', noop: false, allowMutable: false,
    mutableEntries: [], facts: {}, environment: 'production', manifest: '/m.pp', command: ['puppet', 'apply'], pid: 1,
    startedAt: '2026-11-22T09:16:31.123Z', finishedAt: '2026-11-22T09:16:34.323Z', durationMs: 3200, exitCode: 0, puppetExitCode: 2,
    resources: {changed: 3, failed: 0, outOfSync: 3, total: 10}, error: null, reason: null, fingerprint: null, splaySeconds: null, log: '/x/puppet.log', ...fields,
  }
}

async function stateWith(t: Parameters<typeof tempDir>[0], records: RunRecord[]): Promise<string> {
  const state = await tempDir(t)
  for (const r of records) {
    await mkdir(runFiles(state, r.id).dir, {recursive: true})
    await writeRunRecord(state, r)
  }

  return state
}

test.serial('status shows the newest run in a table', async (t) => {
  const state = await stateWith(t, [record('20261122T091631.123Z-aaaa', {state: 'failed'}), record('20261122T101631.123Z-bbbb')])
  const {stdout, error} = await runCommand(['status', '--state-dir', state], {root})
  t.is(error, undefined)
  t.regex(stdout, /run\s+20261122T101631\.123Z-bbbb/)
  t.regex(stdout, /resources\s+3 changed, 0 failed, 3 out of sync, 10 total/)
  t.regex(stdout, /duration\s+3\.2s/)
})

test.serial('status --json of a failed run prints the record and exits 1', async (t) => {
  const state = await stateWith(t, [record('20261122T091631.123Z-aaaa', {state: 'failed', exitCode: 1, error: 'puppet reported failures (exit 4)'})])
  const {stdout, result} = await runCommand<RunRecord>(['status', '20261122T091631.123Z-aaaa', '--state-dir', state, '--json'], {root})
  t.is(JSON.parse(stdout).error, 'puppet reported failures (exit 4)')
  t.is(result?.state, 'failed')
  t.is(process.exitCode, 1)
  process.exitCode = 0
})

test.serial('a run whose process died while running is shown as error', async (t) => {
  const state = await stateWith(t, [record('20261122T091631.123Z-aaaa', {state: 'running', pid: 2 ** 22 + 3, finishedAt: null})])
  const {result} = await runCommand<RunRecord>(['status', '--state-dir', state, '--json'], {root})
  t.is(result?.state, 'error')
  t.regex(result?.error ?? '', /ended without recording a result/)
  process.exitCode = 0
})

test.serial('log of a run whose log file is gone is 66', async (t) => {
  const state = await stateWith(t, [record('20261122T091631.123Z-aaaa', {log: join('/nonexistent', 'puppet.log')})])
  const {error} = await runCommand(['log', '--state-dir', state], {root})
  t.is(error?.oclif?.exit, 66)
})
