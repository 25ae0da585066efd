import {appendFile, chmod, readFile, readdir, rm, stat, writeFile} from 'node:fs/promises'
import {join} from 'node:path'
import {gzipSync} from 'node:zlib'

import test, {type ExecutionContext} from 'ava'

import {objectPath, sha256Of} from '../../../src/lib/delta/objects.js'
import {LocalpuppetError} from '../../../src/lib/errors.js'
import {readRecordHead} from '../../../src/lib/install/install-record.js'
import {parseRepositoryIndex} from '../../../src/lib/repository/repository-index.js'
import {verifyInstalled} from '../../../src/lib/verify/verify-installed.js'
import {verifyRelease} from '../../../src/lib/verify/verify.js'
import {recordFingerprint} from '../../../src/lib/verify/verified-cache.js'
import {exists} from '../../helpers/temp.js'
import {DELTA, type DeltaSetup as Setup, deltaSetup as setup, fetchTag as fetch} from '../../helpers/delta.js'

const {OLD, NEW, CHANGED} = DELTA

async function ino(path: string): Promise<number> {
  return (await stat(path)).ino
}

test('a tag sharing most files with an installed one is installed with those files hard-linked, only the changed file downloaded, and both verify', async (t) => {
  const s = await setup(t)
  const first = await fetch(s, OLD)
  t.is(first.releases[0].delivery, 'archive')
  t.deepEqual(first.releases[0].files, {shared: 0, written: 95, downloaded: 95})

  const second = await fetch(s, NEW)
  const fetched = second.releases[0]
  t.is(fetched.status, 'installed')
  t.is(fetched.delivery, 'objects')
  t.deepEqual(fetched.files, {shared: 94, written: 1, downloaded: 1})
  t.true(fetched.bytes < (await stat(s.archives.new)).size, `${fetched.bytes} bytes downloaded`)

  // The same inode for what did not change; a new one for what did.
  for (const path of ['apache/files/f000.txt', 'stdlib/bin/tool.sh', 'ntp/files/f029.txt']) {
    t.is(await ino(join(s.moduleDir, NEW, path)), await ino(join(s.moduleDir, OLD, path)), path)
  }

  t.not(await ino(join(s.moduleDir, NEW, CHANGED)), await ino(join(s.moduleDir, OLD, CHANGED)))
  t.regex(await readFile(join(s.moduleDir, NEW, CHANGED), 'utf8'), /two/)
  t.is((await stat(join(s.moduleDir, NEW, 'stdlib/bin/tool.sh'))).mode & 0o777, 0o555)
  t.true((await stat(join(s.moduleDir, NEW, 'apache/files/empty'))).isDirectory())
  t.is((await stat(join(s.moduleDir, NEW))).mode & 0o777, 0o555)
  const {results} = await verifyInstalled(s.moduleDir, [])
  t.deepEqual(results.map((r) => [r.release, r.ok]), [[OLD, true], [NEW, true]])
  t.deepEqual(await readdir(join(s.moduleDir, '.localpuppet')).then((names) => names.sort()), ['downloads', 'records', 'repositories.json'])

  // Fetched again: already present, nothing downloaded.
  const again = await fetch(s, NEW)
  t.is(again.releases[0].status, 'already present')
})

/** OLD then NEW fetched (NEW sharing OLD's apache/files/f003.txt), then that file changed through OLD, as an owner can. */
async function tamperedShared(t: ExecutionContext): Promise<Setup> {
  const s = await setup(t)
  await fetch(s, OLD)
  await fetch(s, NEW)
  const shared = join(s.moduleDir, OLD, 'apache/files/f003.txt')
  await chmod(shared, 0o644)
  await appendFile(shared, 'tampered\n')
  await chmod(shared, 0o444)
  return s
}

test('a shared file tampered with is found by verify for every tag that shares it; removing the older tag leaves the newer whole', async (t) => {
  const s = await tamperedShared(t)
  const {results} = await verifyInstalled(s.moduleDir, [])
  t.deepEqual(results.map((r) => [r.release, r.ok, r.modified]), [[OLD, false, ['apache/files/f003.txt']], [NEW, false, ['apache/files/f003.txt']]])

  // Removing the older tag (as an operator does: write back, remove, drop its record) leaves every file of the newer one.
  const s2 = await setup(t)
  await fetch(s2, OLD)
  await fetch(s2, NEW)
  await import('node:child_process').then(({execFileSync}) => execFileSync('chmod', ['-R', 'u+w', join(s2.moduleDir, OLD)]))
  await rm(join(s2.moduleDir, OLD), {recursive: true})
  await rm(join(s2.moduleDir, '.localpuppet', 'records', `${OLD}.json`))
  const after = await verifyInstalled(s2.moduleDir, [])
  t.deepEqual(after.results.map((r) => [r.release, r.ok]), [[NEW, true]])
})

test('verify of one tag whose changed file is shared names the other tags that hold it, and its repair recipe (remove both, fetch again) makes both whole', async (t) => {
  const s = await tamperedShared(t)
  const {results} = await verifyInstalled(s.moduleDir, [OLD])
  t.deepEqual(results.map((r) => [r.release, r.modified, r.sharedWith]), [[OLD, ['apache/files/f003.txt'], {'apache/files/f003.txt': [NEW]}]])
  const {repairRecipe} = await import('../../../src/lib/verify/shared-files.js')
  const recipe = repairRecipe(s.moduleDir, [OLD, NEW])
  t.true(recipe.endsWith(`; then localpuppet fetch --module-dir ${s.moduleDir} ${OLD} ${NEW}`), recipe)
  const removal = recipe.replace(/^to repair: /, '').replace(/; then localpuppet fetch .*$/, '')
  await import('node:child_process').then(({execFileSync}) => execFileSync('sh', ['-c', removal]))
  await fetch(s, OLD)
  await fetch(s, NEW)
  t.deepEqual((await verifyInstalled(s.moduleDir, [])).results.map((r) => [r.release, r.ok]), [[OLD, true], [NEW, true]])
})

test('an installed file changed since its install is not shared: the new tag gets the published content, and verify still names the old tag', async (t) => {
  const s = await setup(t)
  await fetch(s, OLD)
  await tamperedNotShared(t, s)
})

/** One file of OLD changed (as an owner can: write back, change, read-only again), then NEW fetched: that file is downloaded, not shared, and only OLD fails its verify. */
async function tamperedNotShared(t: ExecutionContext, s: Setup): Promise<void> {
  const tampered = join(s.moduleDir, OLD, 'stdlib/files/f001.txt')
  await chmod(tampered, 0o644)
  await writeFile(tampered, 'not what was published\n')
  await chmod(tampered, 0o444)
  const fetched = (await fetch(s, NEW)).releases[0]
  t.is(fetched.delivery, 'objects')
  t.deepEqual(fetched.files, {shared: 93, written: 2, downloaded: 2})
  t.not(await ino(join(s.moduleDir, NEW, 'stdlib/files/f001.txt')), await ino(tampered))
  t.is(await ino(join(s.moduleDir, NEW, 'apache/files/f000.txt')), await ino(join(s.moduleDir, OLD, 'apache/files/f000.txt')))
  const {results} = await verifyInstalled(s.moduleDir, [])
  t.deepEqual(results.map((r) => [r.release, r.ok]), [[OLD, false], [NEW, true]])
}

test('a node with nothing in common downloads the archive, as before', async (t) => {
  const s = await setup(t)
  const fetched = (await fetch(s, NEW)).releases[0]
  t.is(fetched.delivery, 'archive')
  t.is(fetched.bytes, (await stat(s.archives.new)).size)
})

/** The repository's index entry of a tag. */
async function entry(s: Setup, tag: string) {
  return parseRepositoryIndex(await readFile(join(s.repo, 'index.json')), 'index.json').apps.site.tags[tag]
}

async function assertRefused(t: ExecutionContext, s: Setup, why: RegExp): Promise<void> {
  const error = await t.throwsAsync(fetch(s, NEW))
  t.true(error instanceof LocalpuppetError, error?.stack)
  t.is((error as LocalpuppetError).exitCode, 65, error?.message)
  t.regex(error!.message, why)
  t.false(await exists(join(s.moduleDir, NEW)))
  t.is(readRecordHead(s.moduleDir, NEW), null)
  t.deepEqual((await readdir(join(s.moduleDir, '.localpuppet'))).sort(), ['downloads', 'records', 'repositories.json'])
}

test('a hostile repository whose objects do not match the signed index is refused (65) with nothing installed', async (t) => {
  // The changed file's object holds other bytes.
  const s = await setup(t)
  await fetch(s, OLD)
  const changed = Buffer.from("class ntp {\n  notify { 'two': }\n}\n")
  await writeFile(join(s.repo, objectPath(sha256Of(changed))), gzipSync(Buffer.from("class ntp {\n  exec { 'rm -rf /': }\n}\n")))
  await assertRefused(t, s, /does not match the signed index/)

  // A part of the file list naming other content, under the name of the real part.
  const s2 = await setup(t)
  await fetch(s2, OLD)
  const manifest = JSON.parse((await import('node:zlib')).gunzipSync(await readFile(join(s2.repo, objectPath((await entry(s2, '1.0.1')).objects!.manifest)))).toString())
  const ntp = manifest.releases[0].parts.find((part: {prefix: string}) => part.prefix === 'ntp')
  await writeFile(join(s2.repo, objectPath(ntp.sha256)), gzipSync(Buffer.from('[["ntp/manifests/init.pp",10,0,"' + 'e'.repeat(64) + '"]]')))
  await assertRefused(t, s2, /does not match the signed index/)

  // A manifest that is not the one the index names.
  const s3 = await setup(t)
  await fetch(s3, OLD)
  await writeFile(join(s3.repo, objectPath((await entry(s3, '1.0.1')).objects!.manifest)), gzipSync(Buffer.from('{"format":1,"releases":[]}')))
  await assertRefused(t, s3, /does not match the signed index/)
})

test('an installed tag made writable (chmod -R u+w, as before removing it) still shares its files, which are made read-only again for every tag', async (t) => {
  const s = await setup(t)
  await fetch(s, OLD)
  await import('node:child_process').then(({execFileSync}) => execFileSync('chmod', ['-R', 'u+w', join(s.moduleDir, OLD)]))
  const fetched = (await fetch(s, NEW)).releases[0]
  t.deepEqual(fetched.files, {shared: 94, written: 1, downloaded: 1})
  for (const path of ['apache/files/f000.txt', 'stdlib/bin/tool.sh']) {
    t.is(await ino(join(s.moduleDir, NEW, path)), await ino(join(s.moduleDir, OLD, path)), path)
    t.is((await stat(join(s.moduleDir, NEW, path))).mode & 0o222, 0, `${path} is read-only again`)
  }
})

test("a tag its last check keyed (verified-cache.ts) shares its files on their keys; a file changed after that check is not shared, and the new tag is whole", async (t) => {
  const s = await setup(t)
  await fetch(s, OLD)
  // A key is kept only for a file older than two seconds when the check begins.
  await new Promise((resolve) => setTimeout(resolve, 2100))
  t.true((await verifyRelease(s.moduleDir, OLD, undefined, {judgeTrust: false, cache: true})).ok)
  // The keys are for the record as it is on disk: the install reads it parsed, and finds them.
  const cache = JSON.parse(await readFile(join(s.moduleDir, '.localpuppet', 'verified', `${encodeURIComponent(OLD)}.json`), 'utf8'))
  t.is(cache.record, recordFingerprint(JSON.parse(await readFile(join(s.moduleDir, '.localpuppet', 'records', `${OLD}.json`), 'utf8'))))
  t.true(cache.keys.filter((key: string) => key !== '').length >= 90, 'keys kept')
  await tamperedNotShared(t, s)
})
