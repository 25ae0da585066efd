import {type ChildProcess, spawn} from 'node:child_process'
import {once} from 'node:events'
import {readFile, readdir, stat, writeFile} from 'node:fs/promises'
import {createInterface} from 'node:readline'
import {fileURLToPath} from 'node:url'

import test, {type ExecutionContext} from 'ava'

import {LockHeldError} from '../../../src/lib/errors.js'
import {RunLock, lockPath} from '../../../src/lib/state/lock.js'
import {processStartTime} from '../../../src/lib/util/process.js'
import {tempDir} from '../../helpers/temp.js'

const RUN_A = '20261122T091631.123Z-4f2a'
const RUN_B = '20261122T091700.000Z-0b1c'

interface LockFile {
  pid: number
  start: string | null
  runId: string | null
  acquiredAt: string
  token: string
}

async function readLockFile(stateDir: string): Promise<LockFile> {
  return JSON.parse(await readFile(lockPath(stateDir), 'utf8')) as LockFile
}

/** A pid that existed a moment ago and is gone now. */
async function deadPid(): Promise<number> {
  const child = spawn(process.execPath, ['-e', '0'], {stdio: 'ignore'})
  await once(child, 'exit')
  return child.pid!
}

/** A live process that is not this one, stopped when the test ends. */
async function liveProcess(t: ExecutionContext): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 120_000)'], {stdio: 'ignore'})
  t.teardown(() => {
    child.kill()
  })
  await once(child, 'spawn')
  return child
}

async function writeLockFile(stateDir: string, content: Partial<LockFile> | string): Promise<void> {
  const text = typeof content === 'string' ? content : JSON.stringify({start: null, runId: null, acquiredAt: '2026-11-22T09:16:31.123Z', token: 'feedfacecafebeef', ...content})
  await writeFile(lockPath(stateDir), text, {mode: 0o600})
}

test('acquire takes the lock and records who holds it, in a 0600 file', async (t) => {
  const dir = await tempDir(t)
  const lock = await RunLock.acquire(dir, RUN_A)
  const content = await readLockFile(dir)
  t.is(content.pid, process.pid)
  t.is(content.runId, RUN_A)
  t.is((await stat(lockPath(dir))).mode & 0o777, 0o600)
  t.deepEqual(await readdir(dir), ['lock'])
  await lock.release()
})

test('a second acquire fails with exit 73 naming the run and the pid that hold the lock', async (t) => {
  const dir = await tempDir(t)
  const lock = await RunLock.acquire(dir, RUN_A)
  const error = await t.throwsAsync(RunLock.acquire(dir, RUN_B), {instanceOf: LockHeldError})
  t.is(error.exitCode, 73)
  t.is(error.code, 'locked')
  t.true(error.message.includes(RUN_A), error.message)
  t.true(error.message.includes(`pid ${process.pid}`), error.message)
  t.false(error.message.includes(RUN_B))
  t.deepEqual(error.holder, {pid: process.pid, runId: RUN_A})
  // The holder's lock is untouched and no temporary file is left behind.
  t.is((await readLockFile(dir)).runId, RUN_A)
  t.deepEqual(await readdir(dir), ['lock'])
  await lock.release()
})

test('a lock held by another live process is respected', async (t) => {
  const dir = await tempDir(t)
  const holder = await liveProcess(t)
  await writeLockFile(dir, {pid: holder.pid!, start: processStartTime(holder.pid!), runId: RUN_A})
  const error = await t.throwsAsync(RunLock.acquire(dir, RUN_B), {instanceOf: LockHeldError})
  t.is(error.exitCode, 73)
  t.true(error.message.includes(`run ${RUN_A} (pid ${holder.pid})`), error.message)
  t.is((await readLockFile(dir)).pid, holder.pid!)
})

test('update records the run id, so a second acquire names it', async (t) => {
  const dir = await tempDir(t)
  const lock = await RunLock.acquire(dir, null)
  const first = await t.throwsAsync(RunLock.acquire(dir, RUN_B), {instanceOf: LockHeldError})
  t.false(first.message.includes('run 2026'), first.message)
  await lock.update({runId: RUN_A})
  const second = await t.throwsAsync(RunLock.acquire(dir, RUN_B), {instanceOf: LockHeldError})
  t.true(second.message.includes(RUN_A), second.message)
  t.is((await stat(lockPath(dir))).mode & 0o777, 0o600)
  await lock.release()
})

test('release frees the lock for the next run', async (t) => {
  const dir = await tempDir(t)
  const first = await RunLock.acquire(dir, RUN_A)
  await first.release()
  t.deepEqual(await readdir(dir), [])
  const second = await RunLock.acquire(dir, RUN_B)
  t.is((await readLockFile(dir)).runId, RUN_B)
  await second.release()
  t.deepEqual(await readdir(dir), [])
})

test('a lock whose process is gone is taken over', async (t) => {
  const dir = await tempDir(t)
  const pid = await deadPid()
  await writeLockFile(dir, {pid, runId: RUN_A})
  const lock = await RunLock.acquire(dir, RUN_B)
  const content = await readLockFile(dir)
  t.is(content.pid, process.pid)
  t.is(content.runId, RUN_B)
  t.deepEqual(await readdir(dir), ['lock'])
  await lock.release()
})

test('a lock naming a pid that was never there is taken over', async (t) => {
  const dir = await tempDir(t)
  await writeLockFile(dir, {pid: 2 ** 22 + 1, runId: RUN_A})
  const lock = await RunLock.acquire(dir, RUN_B)
  t.is((await readLockFile(dir)).runId, RUN_B)
  await lock.release()
})

test('a lock whose pid now belongs to another process (start time differs) is taken over', async (t) => {
  if (processStartTime(process.pid) === null) {
    t.pass('no /proc here: a reused pid cannot be told apart')
    return
  }

  const dir = await tempDir(t)
  const holder = await liveProcess(t)
  await writeLockFile(dir, {pid: holder.pid!, start: '1', runId: RUN_A})
  const lock = await RunLock.acquire(dir, RUN_B)
  t.is((await readLockFile(dir)).runId, RUN_B)
  await lock.release()
})

for (const [what, garbage] of [
  ['an empty', ''],
  ['a truncated', '{"pid": 12'],
  ['a non-JSON', 'garbage\n'],
  ['a pid-less', '{"runId": "x"}'],
] as const) {
  test(`${what} lock file is taken over`, async (t) => {
    const dir = await tempDir(t)
    await writeLockFile(dir, garbage)
    const lock = await RunLock.acquire(dir, RUN_B)
    const content = await readLockFile(dir)
    t.is(content.pid, process.pid)
    t.is(content.runId, RUN_B)
    t.deepEqual(await readdir(dir), ['lock'])
    await lock.release()
  })
}

test('release does not delete a lock that someone else now holds', async (t) => {
  const dir = await tempDir(t)
  const lock = await RunLock.acquire(dir, RUN_A)
  // Our lock was judged stale and taken over by another run meanwhile.
  const holder = await liveProcess(t)
  await writeLockFile(dir, {pid: holder.pid!, start: processStartTime(holder.pid!), runId: RUN_B, token: '0123456789abcdef'})
  await lock.release()
  const content = await readLockFile(dir)
  t.is(content.runId, RUN_B)
  t.is(content.token, '0123456789abcdef')
  await t.throwsAsync(RunLock.acquire(dir, RUN_A), {instanceOf: LockHeldError})
})

test('release leaves alone a lock file it cannot read', async (t) => {
  const dir = await tempDir(t)
  const lock = await RunLock.acquire(dir, RUN_A)
  await writeFile(lockPath(dir), 'garbage')
  await t.notThrowsAsync(lock.release())
  t.is(await readFile(lockPath(dir), 'utf8'), 'garbage')
})

test('of many acquires at once in one process, exactly one wins', async (t) => {
  const dir = await tempDir(t)
  const results = await Promise.allSettled(Array.from({length: 12}, () => RunLock.acquire(dir, RUN_A)))
  t.is(results.filter((r) => r.status === 'fulfilled').length, 1)
  for (const r of results) if (r.status === 'rejected') t.true(r.reason instanceof LockHeldError)
  t.deepEqual(await readdir(dir), ['lock'])
})

// ---------------------------------------------------------------------------------------
// Separate processes racing for one state directory, as two `localpuppet apply` would.

const LOCK_MODULE = fileURLToPath(new URL('../../../src/lib/state/lock.ts', import.meta.url))
const RACER = `
import {createInterface} from 'node:readline'
const {RunLock} = await import(process.argv[1])
const lines = createInterface({input: process.stdin})[Symbol.asyncIterator]()
console.log('ready')
await lines.next()
try {
  await RunLock.acquire(process.argv[2], 'racer-' + process.pid)
  console.log('won')
} catch (error) {
  console.log(error.code === 'locked' ? 'held' : 'error ' + error.message)
}
// Keep the process (the holder) alive until the test has counted.
await lines.next()
`

async function race(t: ExecutionContext, stateDir: string, racers: number): Promise<string[]> {
  const children = Array.from({length: racers}, () =>
    spawn(process.execPath, ['--import=tsx/esm', '--input-type=module', '-e', RACER, LOCK_MODULE, stateDir], {stdio: ['pipe', 'pipe', 'inherit']}),
  )
  t.teardown(() => {
    for (const child of children) child.stdin!.end()
  })
  const outputs = children.map((child) => createInterface({input: child.stdout!})[Symbol.asyncIterator]())
  for (const output of outputs) t.is((await output.next()).value, 'ready')
  for (const child of children) child.stdin!.write('go\n')
  const results = await Promise.all(outputs.map(async (output) => (await output.next()).value as string))
  for (const child of children) child.stdin!.end()
  await Promise.all(children.map((child) => once(child, 'exit')))
  return results
}

for (const [what, prepare] of [
  ['a free state directory', async (): Promise<void> => {}],
  ['a lock left by a dead process', async (dir: string): Promise<void> => writeLockFile(dir, {pid: await deadPid(), runId: RUN_A})],
  ['a garbage lock file', async (dir: string): Promise<void> => writeLockFile(dir, 'garbage')],
] as const) {
  test(`processes racing for ${what}: exactly one wins`, async (t) => {
    for (let round = 0; round < 5; round++) {
      const dir = await tempDir(t)
      await prepare(dir)
      const results = await race(t, dir, 6)
      t.is(results.filter((r) => r === 'won').length, 1, `round ${round}: ${results.join(', ')}`)
      t.is(results.filter((r) => r === 'held').length, 5, `round ${round}: ${results.join(', ')}`)
    }
  })
}
