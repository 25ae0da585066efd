import {mkdir} from 'node:fs/promises'

import test from 'ava'

import {readNodeState} from '../../../src/lib/state/node-state.js'
import {type RunRecord, newRunRecord, writeRunRecord} from '../../../src/lib/state/run-record.js'
import {runFiles} from '../../../src/lib/state/state-dir.js'
import {tempDir} from '../../helpers/temp.js'

async function write(state: string, id: string, fields: Partial<RunRecord>): Promise<void> {
  await mkdir(runFiles(state, id).dir, {recursive: true})
  await writeRunRecord(state, newRunRecord(id, 'log', new Date(fields.startedAt ?? '2026-11-22T10:00:00.000Z'), {release: 'web/tags/1.0.0', ...fields}))
}

test('busy attempts and a run waiting out its splay never stand for the node; the newest by end time does', async (t) => {
  const state = await tempDir(t)
  // A splayed run started first (older id) but finished last.
  await write(state, '20261122T100000.000Z-aaaa', {state: 'succeeded', startedAt: '2026-11-22T10:00:00.000Z', finishedAt: '2026-11-22T10:09:00.000Z'})
  await write(state, '20261122T100100.000Z-bbbb', {state: 'failed', startedAt: '2026-11-22T10:01:00.000Z', finishedAt: '2026-11-22T10:02:00.000Z'})
  await write(state, '20261122T100500.000Z-cccc', {state: 'busy', startedAt: '2026-11-22T10:05:00.000Z', finishedAt: '2026-11-22T10:10:00.000Z'})
  // Alive (this process) but not holding the lock: waiting out its splay.
  await write(state, '20261122T101500.000Z-dddd', {state: 'running', startedAt: '2026-11-22T10:15:00.000Z', pid: process.pid})
  const node = await readNodeState(state)
  t.is(node.current?.id, '20261122T100000.000Z-aaaa')
  t.is(node.lastCompleted?.id, '20261122T100000.000Z-aaaa')
  t.is(node.lastAttempt?.id, '20261122T101500.000Z-dddd')

  await write(state, '20261122T102000.000Z-eeee', {state: 'refused', release: null, startedAt: '2026-11-22T10:20:00.000Z', finishedAt: '2026-11-22T10:20:01.000Z'})
  const refused = await readNodeState(state)
  t.is(refused.current?.state, 'refused')
  t.is(refused.lastCompleted?.id, '20261122T100000.000Z-aaaa')
})
