import {spawn, spawnSync} from 'node:child_process'
import {statSync} from 'node:fs'
import {cp, mkdir, readFile, rename, utimes, writeFile} from 'node:fs/promises'
import {join} from 'node:path'
import {createInterface} from 'node:readline'
import {setTimeout as sleep} from 'node:timers/promises'

import test, {type ExecutionContext} from 'ava'

import {packRelease} from '../../../src/lib/archive/pack.js'
import {installArchive} from '../../../src/lib/install/install-archive.js'
import {openArchive} from '../../../src/lib/install/open-archive.js'
import {listEntries} from '../../../src/lib/tree/release-tree.js'
import {KeyWriter, statFile, verifiedCacheDir} from '../../../src/lib/verify/verified-cache.js'
import {verifyRelease} from '../../../src/lib/verify/verify.js'
import {tempDir, writeReleases, writeTree} from '../../helpers/temp.js'

/*
 * The keys the check before a run keeps (verified-cache.ts) must never let through a file
 * that reading it would refuse: not when what was keyed is not what was read, not against
 * another record, not while another process can write the file without a new ctime.
 */

const APP = 'foo/tags/1.0.0'
const FILE = 'foo/manifests/init.pp'
const GOOD = 'class foo {}\n'
const BAD = 'class foo { exec { "/bin/evil": } }'.slice(0, GOOD.length - 1) + '\n'

/** foo 1.0.0 installed with a record, its files older than the two seconds a key must settle. */
async function installed(t: ExecutionContext): Promise<{dir: string; modules: string; root: string}> {
  const dir = await tempDir(t, 'localpuppet-vcache-')
  const src = join(dir, 'src')
  await writeReleases(src, {[APP]: null})
  await writeTree(join(src, APP), {[FILE]: GOOD, 'foo/manifests/other.pp': 'class foo::other {}\n'})
  const archive = join(dir, 'foo.tar.gz')
  await packRelease({moduleDir: src, ref: APP, output: archive})
  const modules = join(dir, 'modules')
  await mkdir(modules)
  const {stream, label} = await openArchive(archive)
  await installArchive(stream, label, {moduleDir: modules, trustDir: null})
  return {dir, modules, root: join(modules, APP)}
}

/** The check before a run: the tree as the trust walk saw it, then verifyRelease with the cache. */
async function checkBeforeRun(modules: string, root: string, between?: () => Promise<void>) {
  const tree = listEntries(root, APP, [])
  await between?.()
  return verifyRelease(modules, APP, undefined, {judgeTrust: false, cache: true, tree})
}

test('a key is kept only for the file that was read: a directory swapped between the trust walk and the read does not vouch for the file the walk saw', async (t) => {
  const {dir, modules, root} = await installed(t)
  // A copy of foo/manifests with one file changed (same size), made long before.
  const bad = join(dir, 'bad')
  await cp(join(root, 'foo/manifests'), bad, {recursive: true})
  await writeFile(join(bad, 'init.pp'), BAD)
  await sleep(2100)
  const swap = async () => {
    await rename(join(root, 'foo/manifests'), join(dir, 'parked'))
    await rename(bad, join(root, 'foo/manifests'))
    await rename(join(dir, 'parked'), bad)
  }

  // The walk sees the changed file; the good one is back before it is read.
  await swap()
  t.true((await checkBeforeRun(modules, root, swap)).ok, 'what was read matches')
  // The changed file back in place (its own inode, ctime and size, untouched meanwhile).
  await swap()
  t.is(await readFile(join(root, FILE), 'utf8'), BAD)
  const result = await checkBeforeRun(modules, root)
  t.false(result.ok)
  t.deepEqual(result.modified, [FILE])
})

test('keys kept against one record are not believed against another that claims the same digest', async (t) => {
  const {modules, root} = await installed(t)
  await sleep(2100)
  t.true((await checkBeforeRun(modules, root)).ok)
  const recordFile = join(modules, '.localpuppet/records', `${APP}.json`)
  const original = await readFile(recordFile, 'utf8')
  // Someone "blesses" a local change by editing the record's sha256 (not its digest field)...
  const {createHash} = await import('node:crypto')
  const edited = JSON.parse(original) as {files: Array<{path: string; sha256: string}>}
  edited.files.find((file) => file.path === FILE)!.sha256 = createHash('sha256').update(BAD).digest('hex')
  await writeFile(recordFile, JSON.stringify(edited))
  await writeFile(join(root, FILE), BAD)
  await sleep(2100)
  t.true((await checkBeforeRun(modules, root)).ok, 'the changed file matches the edited record')
  // ...then puts the installed record back: the file no longer matches it.
  await writeFile(recordFile, original)
  const result = await checkBeforeRun(modules, root)
  t.false(result.ok)
  t.deepEqual(result.modified, [FILE])
})

/**
 * python3 mapping a file shared and writable: it dirties the page (same byte), says
 * `mapped`, then on each line from its stdin writes `text` through the mapping (`written`),
 * then unmaps it and closes (`unmapped`).
 */
function mapWriter(t: ExecutionContext, path: string, text: string) {
  const writer = spawn('python3', ['-c', `
import mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
m = mmap.mmap(fd, 0, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
os.close(fd)
m[0:1] = m[0:1]
print('mapped', flush=True)
sys.stdin.readline()
m[0:len(sys.argv[2])] = sys.argv[2].encode()
print('written', flush=True)
sys.stdin.readline()
m.close()
print('unmapped', flush=True)
sys.stdin.readline()
`, path, text], {stdio: ['pipe', 'pipe', 'inherit']})
  t.teardown(() => writer.kill())
  // Whole lines: a chunk of its output may hold part of one.
  const lines = createInterface({input: writer.stdout})[Symbol.asyncIterator]()
  return {writer, lines}
}

const python = spawnSync('python3', ['-c', 'import mmap'], {stdio: 'ignore'}).status === 0

// A page of a shared writable mapping stays writable until it is written back (about 30 s
// on ext4; never on tmpfs): writes through it in the meantime set no new mtime or ctime.
;(python ? test : test.skip)('no key is kept for a file another process has mapped shared and writable: its bytes can change without a new ctime', async (t) => {
  const {modules, root} = await installed(t)
  const path = join(root, FILE)
  const {writer, lines} = mapWriter(t, path, BAD)
  t.regex(String((await lines.next()).value), /mapped/)
  await sleep(2100)
  t.true((await checkBeforeRun(modules, root)).ok)
  writer.stdin.write('\n')
  t.regex(String((await lines.next()).value), /written/)
  t.is(await readFile(path, 'utf8'), BAD)
  const result = await checkBeforeRun(modules, root)
  t.false(result.ok, 'the changed bytes are read')
  t.deepEqual(result.modified, [FILE])
})

;(python ? test : test.skip)('no key is kept for a file mapped shared and writable when the check began, written after it was read and unmapped before the keys were kept', async (t) => {
  const {modules, root} = await installed(t)
  const path = join(root, FILE)
  await sleep(2100)
  const {writer, lines} = mapWriter(t, path, BAD)
  t.regex(String((await lines.next()).value), /mapped/)
  // The check begins (the maps are read) and reads the file, whose key would be kept...
  const keys = KeyWriter.open(modules, APP, 'sha256:record')!
  const key = statFile(path)!.key
  keys.add(key)
  // ...which changes through the page already faulted writable (no new ctime), and is unmapped before the keys are kept.
  writer.stdin.write('\n')
  t.regex(String((await lines.next()).value), /written/)
  writer.stdin.write('\n')
  t.regex(String((await lines.next()).value), /unmapped/)
  t.is(await readFile(path, 'utf8'), BAD)
  keys.commit()
  const cache = JSON.parse(await readFile(join(modules, '.localpuppet/verified', `${encodeURIComponent(APP)}.json`), 'utf8')) as {keys: string[]}
  t.deepEqual(cache.keys, [''], 'no key for the file that was mapped')
})

;(python ? test : test.skip)('no key is kept for a file mapped shared and writable after the check began and still mapped when the keys are kept; the other keys are', async (t) => {
  const {modules, root} = await installed(t)
  const path = join(root, FILE)
  await sleep(2100)
  const keys = KeyWriter.open(modules, APP, 'sha256:record')!
  const other = statFile(join(root, 'foo/manifests/other.pp'))!.key
  keys.add(statFile(path)!.key)
  keys.add(other)
  const {lines} = mapWriter(t, path, BAD)
  t.regex(String((await lines.next()).value), /mapped/)
  keys.commit()
  const cache = JSON.parse(await readFile(join(modules, '.localpuppet/verified', `${encodeURIComponent(APP)}.json`), 'utf8')) as {keys: string[]}
  t.deepEqual(cache.keys, ['', other])
})

test('a check that finds every key unchanged writes nothing; one that finds a key moved keeps the keys of the files before it', async (t) => {
  const {modules, root} = await installed(t)
  await sleep(2100)
  t.true((await checkBeforeRun(modules, root)).ok)
  const cache = join(verifiedCacheDir(modules), `${encodeURIComponent(APP)}.json`)
  const keysOf = async () => (JSON.parse(await readFile(cache, 'utf8')) as {keys: string[]}).keys
  const kept = await keysOf()
  t.true(kept.filter((key) => key !== '').length >= 2, 'the settled files are keyed')

  // Nothing moved: no temporary file made and removed, so the directory is as it was.
  const before = statSync(verifiedCacheDir(modules)).mtimeMs
  await sleep(20)
  t.true((await checkBeforeRun(modules, root)).ok)
  t.is(statSync(verifiedCacheDir(modules)).mtimeMs, before)
  t.deepEqual(await keysOf(), kept)

  // The last file's times moved (same bytes): the keys before it are kept from the cache, its own is not (too young).
  const now = new Date()
  await utimes(join(root, 'foo/manifests/other.pp'), now, now)
  t.true((await checkBeforeRun(modules, root)).ok)
  const after = await keysOf()
  t.is(after.length, kept.length)
  t.is(after.filter((key) => key !== '').length, kept.filter((key) => key !== '').length - 1)
  t.deepEqual(
    after.filter((key, i) => key !== kept[i]),
    [''],
  )

  // Settled, it is read once more and keyed again: every file as at first, each with its own key.
  await sleep(2100)
  t.true((await checkBeforeRun(modules, root)).ok)
  const again = await keysOf()
  t.is(again.filter((key) => key !== '').length, kept.filter((key) => key !== '').length)
  t.deepEqual(again.filter((key, i) => key !== kept[i]).length, 1, 'only the touched file has a new key')
})
