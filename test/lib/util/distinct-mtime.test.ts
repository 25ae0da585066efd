import test from 'ava'
import {mkdtemp, rm, stat, utimes, writeFile} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {writeSignedFileAtomic} from '../../../src/lib/util/atomic-write.js'
import {distinctMtime} from '../../../src/lib/util/distinct-mtime.js'

const seconds = async (path: string): Promise<number> => Math.floor((await stat(path)).mtimeMs / 1000)

test('two writes of a signed file within one second give the file and its signature different whole-second mtimes (a web server validator changes)', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'lp-mtime-'))
  t.teardown(() => rm(dir, {recursive: true, force: true}))
  const path = join(dir, 'index.json')
  const sig = {path: `${path}.sig`, bytes: Buffer.from('sig-1')}
  // Same size both times, as a node's document keeps its size between writes.
  await writeSignedFileAtomic(path, Buffer.from('{"version":1}'), sig)
  const first = [await seconds(path), await seconds(sig.path)]
  await writeSignedFileAtomic(path, Buffer.from('{"version":2}'), {...sig, bytes: Buffer.from('sig-2')})
  const second = [await seconds(path), await seconds(sig.path)]
  t.true(second[0] > first[0], `index.json mtime ${second[0]} after ${first[0]}`)
  t.true(second[1] > first[1], `index.json.sig mtime ${second[1]} after ${first[1]}`)
  t.is((await stat(path)).mtimeMs % 1000, 0)
})

test('the mtime is now in whole seconds for a new file, and one second past a replaced file stamped later than now', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'lp-mtime-'))
  t.teardown(() => rm(dir, {recursive: true, force: true}))
  const path = join(dir, 'doc.json')
  t.is((await distinctMtime(path, 1_700_000_000_700)).getTime(), 1_700_000_000_000)
  await writeFile(path, 'x')
  await utimes(path, 1_700_000_005, 1_700_000_005)
  t.is((await distinctMtime(path, 1_700_000_000_700)).getTime(), 1_700_000_006_000)
  await utimes(path, 1_600_000_000, 1_600_000_000)
  t.is((await distinctMtime(path, 1_700_000_000_700)).getTime(), 1_700_000_000_000)
})

test('a signed file stamped past what the filesystem stores (a broken clock) still gets a different mtime on each write, not the limit again', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'lp-mtime-'))
  t.teardown(() => rm(dir, {recursive: true, force: true}))
  const path = join(dir, 'index.json')
  await writeFile(path, '{"version":1}')
  // Year 2500: ext4 keeps 2446-05-10 (its limit); a filesystem that stores it keeps 2500.
  const year2500 = Date.UTC(2500, 0, 1) / 1000
  await utimes(path, year2500, year2500)
  const stamped = await seconds(path)
  await writeSignedFileAtomic(path, Buffer.from('{"version":2}'), null)
  const first = await seconds(path)
  await writeSignedFileAtomic(path, Buffer.from('{"version":3}'), null)
  const second = await seconds(path)
  t.not(first, stamped, `the first write's mtime ${first} is the one it replaced`)
  t.not(second, first, `two writes both got mtime ${second}`)
})

test('a replaced file stamped past the latest date JavaScript holds gives now, not an invalid date (utimes threw: publish failed as a bug)', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'lp-mtime-'))
  t.teardown(() => rm(dir, {recursive: true, force: true}))
  const path = join(dir, 'doc.json')
  await writeFile(path, 'x')
  const limit = 8.64e12
  await utimes(path, limit, limit).catch(() => {})
  // Only a filesystem that stores it shows the case (tmpfs: TMPDIR=/dev/shm); ext4 keeps its own limit (the test above).
  if ((await seconds(path)) < limit) return t.pass()
  t.is((await distinctMtime(path, 1_700_000_000_700)).getTime(), 1_700_000_000_000)
})
