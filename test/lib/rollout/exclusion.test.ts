import {execFileSync} from 'node:child_process'
import {mkdtemp, readFile, rm, writeFile} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'

import test from 'ava'

import {DamagedRecordError, LockHeldError} from '../../../src/lib/errors.js'
import {claimNodes} from '../../../src/lib/rollout/exclusion.js'

async function rolloutsDir(t: {teardown(fn: () => Promise<void>): void}): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'localpuppet-exclusion-'))
  t.teardown(() => rm(dir, {recursive: true, force: true}))
  return dir
}

// Issue 32, item 2: two rollouts over the same nodes both exited 0, the fleet ended mixed.
test('a rollout over a node another live rollout drives is refused (73) naming it; over other nodes, or once the first ended, it goes', async (t) => {
  const dir = await rolloutsDir(t)
  const first = await claimNodes(dir, '20261127T120000.000Z-aaaa', ['db1', 'db2', 'web1', 'web2'])
  const refused = await t.throwsAsync(claimNodes(dir, '20261127T120004.000Z-bbbb', ['web1', 'web2', 'db3']), {instanceOf: LockHeldError})
  t.is(refused!.exitCode, 73)
  t.regex(refused!.message, new RegExp(`^rollout 20261127T120000\\.000Z-aaaa \\(process ${process.pid}, since \\S+\\) is driving web1, web2: one rollout at a time over a node`))
  const other = await claimNodes(dir, '20261127T120005.000Z-cccc', ['db3', 'db4'])
  await first.release()
  const second = await claimNodes(dir, '20261127T120006.000Z-dddd', ['web1', 'web2', 'db1'])
  await t.throwsAsync(claimNodes(dir, '20261127T120006.000Z-dddd', ['zz']), {instanceOf: LockHeldError, message: /^rollout 20261127T120006\.000Z-dddd is being driven by process \d+/})
  await Promise.all([other.release(), second.release()])
  t.deepEqual(JSON.parse(await readFile(join(dir, 'active.json'), 'utf8')), {})
})

test('rollouts started at the same moment over a shared node: exactly one claims it (the check and the claim are one step)', async (t) => {
  const dir = await rolloutsDir(t)
  const claims = await Promise.allSettled(Array.from({length: 8}, (_, i) => claimNodes(dir, `20261127T12000${i}.000Z-000${i}`, ['shared', `own${i}`])))
  t.is(claims.filter((claim) => claim.status === 'fulfilled').length, 1)
  for (const claim of claims) if (claim.status === 'rejected') t.true(claim.reason instanceof LockHeldError, String(claim.reason))
})

test('the claim of a rollout whose process is gone (or whose pid now belongs to another process) does not count', async (t) => {
  const dir = await rolloutsDir(t)
  const gone = Number(execFileSync('sh', ['-c', 'sh -c "echo \\$\\$"']).toString().trim())
  const entry = (id: string, pid: number, pidStart: string | null) => ({id, pid, pidStart, nodes: ['web1'], since: '2026-11-27T12:00:00.000Z'})
  await writeFile(
    join(dir, 'active.json'),
    JSON.stringify({a: entry('20261127T110000.000Z-dead', gone, null), b: entry('20261127T110000.000Z-reus', process.pid, 'not-its-start-time')}),
  )
  const claim = await claimNodes(dir, '20261127T120000.000Z-live', ['web1'])
  t.deepEqual(Object.keys(JSON.parse(await readFile(join(dir, 'active.json'), 'utf8'))), ['20261127T120000.000Z-live'])
  await claim.release()
  await writeFile(join(dir, 'active.json'), '{"a": ')
  await t.throwsAsync(claimNodes(dir, '20261127T120001.000Z-next', ['web1']), {instanceOf: DamagedRecordError, message: /active\.json: not JSON .*remove it once no rollout is running/})
})
