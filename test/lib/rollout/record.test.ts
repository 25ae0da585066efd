import {chmod, chown, mkdtemp, readFile, rm, writeFile} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'

import test from 'ava'

import {DamagedRecordError, UntrustedPathError} from '../../../src/lib/errors.js'
import {RolloutStore, engineFromRecord, listRolloutRecords, openRolloutsDir, readRolloutRecord} from '../../../src/lib/rollout/record.js'
import {hostileUid} from '../../helpers/hostile-user.js'
import {recordedRollout} from '../../helpers/rollout-record.js'

async function recorded(t: {teardown(fn: () => Promise<void>): void}) {
  const state = await mkdtemp(join(tmpdir(), 'localpuppet-rollouts-'))
  t.teardown(() => rm(state, {recursive: true, force: true}))
  return {state, ...(await recordedRollout(state))}
}

test('a record replays to the state it records; one whose events were edited is refused (65), not resumed', async (t) => {
  const {dir, store, engine} = await recorded(t)
  const record = await readRolloutRecord(dir, store.record.id)
  t.deepEqual(engineFromRecord(record, store.path).state, engine.state)
  t.is(record.state.nodes.find((node) => node.node === 'b')?.state, 'failed')

  // Someone turns b's failure into a success in the events: the state no longer follows.
  const text = await readFile(store.path, 'utf8')
  const edited = JSON.parse(text)
  for (const event of edited.events) for (const answer of Object.values(event.answers ?? {}) as Array<{state?: string}>) if (answer.state === 'failed') answer.state = 'succeeded'
  await writeFile(store.path, JSON.stringify(edited))
  t.throws(() => engineFromRecord(edited, store.path), {instanceOf: DamagedRecordError, message: /do not lead to the state it records/})
  await writeFile(store.path, '{"version": 1')
  await t.throwsAsync(readRolloutRecord(dir, store.record.id), {instanceOf: DamagedRecordError, message: /not JSON/})
  t.deepEqual((await listRolloutRecords(dir)).records, [])
})

test('a record others can write, or a rollouts directory others can write, is refused (77)', async (t) => {
  const {state, dir, store} = await recorded(t)
  await chmod(store.path, 0o666)
  await t.throwsAsync(readRolloutRecord(dir, store.record.id), {instanceOf: UntrustedPathError})
  t.is((await readRolloutRecord(dir, store.record.id, true)).id, store.record.id, '--allow-untrusted reads it')
  await chmod(store.path, 0o600)
  await chmod(dir, 0o777)
  await t.throwsAsync(openRolloutsDir(state), {instanceOf: UntrustedPathError})
  await chmod(dir, 0o700)
})

// Issue 26: edited by another user (useradd), not just made writable.
const hostile = hostileUid()
;(hostile === null ? test.skip : test)('a rollout record another user owns, or replaced in a rollouts directory they own, is refused (77) naming it', async (t) => {
  const {state, dir, store} = await recorded(t)
  await chown(store.path, hostile!, hostile!)
  const owned = await t.throwsAsync(readRolloutRecord(dir, store.record.id), {instanceOf: UntrustedPathError})
  t.regex(owned!.message, new RegExp(`^rollout record ${store.path} is not trusted: owned by uid ${hostile}`))
  await chown(store.path, 0, 0)
  await chown(dir, hostile!, hostile!)
  await t.throwsAsync(openRolloutsDir(state), {instanceOf: UntrustedPathError, message: /rollouts directory .* is not trusted: owned by uid/})
  await chown(dir, 0, 0)
})

test('a finished rollout is not resumed; a rollout id is checked before it is joined into a path', async (t) => {
  const {dir, store} = await recorded(t)
  const again = new RolloutStore(dir, await readRolloutRecord(dir, store.record.id))
  await t.throwsAsync(again.claim(), {message: /is finished/})
  await t.throwsAsync(readRolloutRecord(dir, '../../etc/passwd'), {message: /is not a rollout id/})
})
