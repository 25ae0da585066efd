import {spawn} from 'node:child_process'
import {once} from 'node:events'
import {mkdir, readFile, readdir, stat, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import test from 'ava'
import fc from 'fast-check'

import {NotFoundError, UsageError} from '../../../src/lib/errors.js'
import {RUN_ID_PLACEHOLDER, assertRunId, isRunId, newRunId} from '../../../src/lib/state/run-id.js'
import {type RunRecord, effectiveRecord, latestRunId, listRunIds, readRunRecord, writeRunRecord} from '../../../src/lib/state/run-record.js'
import {runDir, runFiles, runsDir} from '../../../src/lib/state/state-dir.js'
import {isProcessAlive} from '../../../src/lib/util/process.js'
import {tempDir} from '../../helpers/temp.js'

function record(id: string, fields: Partial<RunRecord> = {}): RunRecord {
  return {
    id,
    state: 'succeeded',
    release: 'foo/tags/1.4.0',
    ref: 'foo@^1.4',
    modulepath: ['/etc/puppet/modules/foo/tags/1.4.0', '/etc/puppet/modules/dist/tags/2.0.1'],
    input: {source: '/etc/puppet/input.yaml', document: {app: 'foo@^1.4', parameters: {password: "s3cr3t 'quoted' $(x)"}}},
    inputDigest: 'sha256:' + '0'.repeat(64),
    noop: false,
    allowMutable: false,
    mutableEntries: [],
    facts: {lifecycle_stage: 'bootstrap'},
    environment: 'production',
    manifest: '/etc/puppet/manifests/default.pp',
    command: ['/usr/bin/puppet', 'apply', '--detailed-exitcodes'],
    pid: process.pid,
    startedAt: '2026-11-22T09:16:31.123Z',
    finishedAt: '2026-11-22T09:16:41.123Z',
    durationMs: 10_000,
    exitCode: 0,
    puppetExitCode: 2,
    resources: {changed: 1, failed: 0, outOfSync: 1, total: 12},
    error: null,
    reason: null,
    fingerprint: null,
    splaySeconds: null,
    log: `/var/lib/localpuppet/runs/${id}/puppet.log`,
    ...fields,
  }
}

async function writeRun(stateDir: string, rec: RunRecord): Promise<void> {
  await mkdir(runDir(stateDir, rec.id), {recursive: true, mode: 0o700})
  await writeRunRecord(stateDir, rec)
}

async function deadPid(): Promise<number> {
  const child = spawn(process.execPath, ['-e', '0'], {stdio: 'ignore'})
  await once(child, 'exit')
  return child.pid!
}

test('a run record reads back exactly as written', async (t) => {
  const dir = await tempDir(t)
  const rec = record(newRunId(), {state: 'failed', error: 'puppet exited 1', resources: null, puppetExitCode: 1, exitCode: 1})
  await writeRun(dir, rec)
  t.deepEqual(await readRunRecord(dir, rec.id), rec)
  // camelCase JSON on disk, as documented for --json readers.
  const onDisk = JSON.parse(await readFile(runFiles(dir, rec.id).record, 'utf8')) as Record<string, unknown>
  t.deepEqual(Object.keys(onDisk), Object.keys(rec))
  t.is(onDisk.inputDigest, rec.inputDigest)
})

test('run records are written mode 0600, leaving no temporary file', async (t) => {
  const dir = await tempDir(t)
  const rec = record(newRunId())
  await writeRun(dir, rec)
  t.is((await stat(runFiles(dir, rec.id).record)).mode & 0o777, 0o600)
  await writeRunRecord(dir, {...rec, state: 'failed'})
  t.is((await stat(runFiles(dir, rec.id).record)).mode & 0o777, 0o600)
  t.deepEqual(await readdir(runDir(dir, rec.id)), ['run.json'])
})

test('a reader never sees half a record while it is rewritten', async (t) => {
  const dir = await tempDir(t)
  const id = newRunId()
  const small = record(id, {state: 'running', finishedAt: null})
  const large = record(id, {error: 'x'.repeat(200_000), state: 'error'})
  await writeRun(dir, small)
  let writing = true
  const writer = (async () => {
    for (let i = 0; i < 40; i++) await writeRunRecord(dir, i % 2 === 0 ? large : small)
    writing = false
  })()
  let reads = 0
  try {
    while (writing) {
      const read = await readRunRecord(dir, id)
      t.deepEqual(read, read.state === 'running' ? small : large)
      reads++
    }
  } finally {
    await writer
  }

  t.true(reads > 0)
})

test('readRunRecord of a run that does not exist fails with 66 naming it', async (t) => {
  const dir = await tempDir(t)
  const id = newRunId()
  const error = await t.throwsAsync(readRunRecord(dir, id), {instanceOf: NotFoundError})
  t.is(error.exitCode, 66)
  t.true(error.message.includes(id))
})

test('listRunIds lists runs oldest first and ignores everything that is not a run', async (t) => {
  const dir = await tempDir(t)
  t.deepEqual(await listRunIds(dir), [], 'no runs directory yet')
  const ids = [new Date('2026-01-02T00:00:00.000Z'), new Date('2025-12-31T23:59:59.999Z'), new Date('2026-01-02T00:00:00.001Z')].map((d) => newRunId(d))
  for (const id of ids) await writeRun(dir, record(id))
  for (const name of ['tmp', '.hidden', 'not-a-run', `${ids[0]}.old`, '20261122T091631.123Z-4F2A', '20261122T091631Z-4f2a']) {
    await mkdir(join(runsDir(dir), name))
  }

  await writeFile(join(runsDir(dir), 'README'), 'x')
  t.deepEqual(await listRunIds(dir), [ids[1], ids[0], ids[2]])
})

test('latestRunId picks the newest run, whatever order they were written in', async (t) => {
  const dir = await tempDir(t)
  const older = newRunId(new Date('2026-11-22T09:16:31.123Z'))
  const newest = newRunId(new Date('2026-11-22T10:00:00.000Z'))
  const middle = newRunId(new Date('2026-11-22T09:59:59.999Z'))
  for (const id of [newest, older, middle]) await writeRun(dir, record(id))
  await mkdir(join(runsDir(dir), 'zzz-not-a-run'))
  t.is(await latestRunId(dir), newest)
})

test('latestRunId skips a newest run directory that has no record yet', async (t) => {
  const dir = await tempDir(t)
  const older = newRunId(new Date('2026-11-22T09:16:31.123Z'))
  await writeRun(dir, record(older))
  await mkdir(runDir(dir, newRunId(new Date('2026-11-22T10:00:00.000Z'))), {recursive: true})
  t.is(await latestRunId(dir), older)
})

test('latestRunId with no runs fails with 66', async (t) => {
  const dir = await tempDir(t)
  const error = await t.throwsAsync(latestRunId(dir), {instanceOf: NotFoundError})
  t.is(error.exitCode, 66)
  await mkdir(runsDir(dir))
  await t.throwsAsync(latestRunId(dir), {instanceOf: NotFoundError})
})

test("a 'running' record whose process is gone reads as 'error', and the file is left as it was", async (t) => {
  const dir = await tempDir(t)
  const pid = await deadPid()
  const rec = record(newRunId(), {state: 'running', pid, finishedAt: null, durationMs: null, exitCode: null, puppetExitCode: null, resources: null})
  await writeRun(dir, rec)
  const before = await readFile(runFiles(dir, rec.id).record, 'utf8')
  const effective = effectiveRecord(await readRunRecord(dir, rec.id), isProcessAlive)
  t.is(effective.state, 'error')
  t.true(effective.error!.includes(String(pid)), effective.error!)
  t.is(effective.id, rec.id)
  t.is(await readFile(runFiles(dir, rec.id).record, 'utf8'), before)
  t.is((await readRunRecord(dir, rec.id)).state, 'running')
})

test("a 'running' record whose process is alive, or a finished one, is shown as it is", (t) => {
  const running = record(newRunId(), {state: 'running', pid: process.pid})
  t.is(effectiveRecord(running, isProcessAlive), running)
  for (const state of ['succeeded', 'failed', 'error', 'interrupted'] as const) {
    const finished = record(newRunId(), {state, pid: 2 ** 22 + 1})
    t.is(effectiveRecord(finished, () => false), finished)
  }
})

test('run ids are run ids and sort by start time as plain strings', (t) => {
  t.true(newRunId(new Date('2026-11-22T09:16:31.123Z')).startsWith('20261122T091631.123Z-'))
  t.regex(newRunId(), /^\d{8}T\d{6}\.\d{3}Z-[0-9a-f]{4}$/)
  const date = fc.date({min: new Date('1970-01-01T00:00:00.000Z'), max: new Date('9999-12-31T23:59:59.999Z'), noInvalidDate: true})
  fc.assert(
    fc.property(date, date, (a, b) => {
      const [idA, idB] = [newRunId(a), newRunId(b)]
      if (!isRunId(idA) || !isRunId(idB)) return false
      if (a.getTime() < b.getTime()) return idA < idB
      if (a.getTime() > b.getTime()) return idA > idB
      return idA.slice(0, 20) === idB.slice(0, 20)
    }),
    {numRuns: 500},
  )
})

test('two run ids made in the same millisecond differ', (t) => {
  const now = new Date()
  const ids = new Set(Array.from({length: 20}, () => newRunId(now)))
  t.true(ids.size > 1)
})

test('assertRunId refuses anything that is not a run id with exit 64, before it becomes a path', (t) => {
  for (const bad of ['../x', '', '..', '/etc/passwd', '20261122T091631.123Z-4f2a/../../x', '20261122T091631.123Z-4f2a\n', ' 20261122T091631.123Z-4f2a', RUN_ID_PLACEHOLDER, 'latest']) {
    const error = t.throws(() => assertRunId(bad), {instanceOf: UsageError}, JSON.stringify(bad))
    t.is(error.exitCode, 64)
    t.true(error.message.includes(JSON.stringify(bad)), error.message)
  }

  t.is(assertRunId('20261122T091631.123Z-4f2a'), '20261122T091631.123Z-4f2a')
})

test('a running record whose pid now belongs to another process (reused after a crash) reads as error', (t) => {
  const record = {id: '20261122T091631.123Z-aaaa', state: 'running', pid: process.pid, pidStart: 'not-this-start'} as unknown as Parameters<typeof effectiveRecord>[0]
  const effective = effectiveRecord(record, () => true)
  t.is(effective.state, 'error')
  t.regex(effective.error ?? '', /ended without recording a result/)
})
