import {chmod, mkdir, readFile, rm, writeFile} from 'node:fs/promises'
import {dirname, join} from 'node:path'

import test, {type ExecutionContext} from 'ava'

import {packRelease} from '../../../src/lib/archive/pack.js'
import {installArchive} from '../../../src/lib/install/install-archive.js'
import {readInstallRecord} from '../../../src/lib/install/install-record.js'
import {openArchive} from '../../../src/lib/install/open-archive.js'
import {verifyRelease} from '../../../src/lib/verify/verify.js'
import {type Tree, tempDir, writeReleases, writeTree} from '../../helpers/temp.js'

const APP = 'big/tags/1.0.0'

/** A release of `count` files in a few hundred directories, some of them nested deep, and an empty directory. */
function manyFiles(count: number): Tree {
  const tree: Tree = {}
  for (let i = 0; i < count; i++) tree[`${APP}/mod${i % 40}/${i % 3 === 0 ? 'a/b/c/' : ''}d${i % 7}/f${i}.pp`] = `class f${i} {}\n`
  tree[`${APP}/emptymod/files/empty`] = null
  return tree
}

/** The release packed and installed from its archive: its module dir and root. */
async function installedTree(t: ExecutionContext, tree: Tree): Promise<{moduleDir: string; root: string}> {
  const dir = await tempDir(t)
  const src = join(dir, 'src')
  await writeReleases(src, {[APP]: null})
  await writeTree(src, tree)
  const archive = join(dir, 'release.tar.gz')
  await packRelease({moduleDir: src, ref: APP, output: archive})
  const moduleDir = join(dir, 'modules')
  await mkdir(moduleDir)
  const {stream, label} = await openArchive(archive)
  await installArchive(stream, label, {moduleDir, trustDir: null})
  return {moduleDir, root: join(moduleDir, APP)}
}

test('verify of a release larger than a batch of checks reports every change in every batch, and each only once', async (t) => {
  const {moduleDir, root} = await installedTree(t, manyFiles(5000))
  const record = (await readInstallRecord(moduleDir, APP))!
  t.is(record.files.length, 5001)
  t.true((await verifyRelease(moduleDir, APP)).ok)

  // One change in the first, the second and the last batch (512 files each), a file
  // gone, one added, an empty directory gone and one added.
  const [first, middle, last, gone] = [10, 2500, 4990, 3000].map((i) => record.files[i].path)
  const writable = async (path: string) => {
    await chmod(dirname(path), 0o755)
    await chmod(path, 0o644).catch(() => {})
  }

  for (const path of [first, middle, last]) {
    await writable(join(root, path))
    await writeFile(join(root, path), `${await readFile(join(root, path), 'utf8')}# changed\n`)
  }

  await writable(join(root, gone))
  await rm(join(root, gone))
  await chmod(join(root, 'mod1'), 0o755)
  await writeFile(join(root, 'mod1', 'added.pp'), 'class added {}\n')
  await chmod(join(root, 'emptymod', 'files'), 0o755)
  await rm(join(root, 'emptymod', 'files', 'empty'), {recursive: true})
  await mkdir(join(root, 'mod1', 'new-empty'))

  const result = await verifyRelease(moduleDir, APP)
  t.false(result.ok)
  t.deepEqual(result.modified, [first, middle, last].sort())
  t.deepEqual(result.missing, [gone, 'emptymod/files/empty/'].sort())
  // The directory that held the empty one is empty now: added as an empty directory.
  t.deepEqual(result.extra, ['emptymod/files/', 'mod1/added.pp', 'mod1/new-empty/'])
})

// Names that sort before and after '/' (a-b, a.x, a/x, a0): the walk beside the record
// must take a directory's files where a sorted list of paths has them.
const NEIGHBOURS: Tree = {[`${APP}/a-b`]: '1\n', [`${APP}/a.x`]: '2\n', [`${APP}/a/x`]: '3\n', [`${APP}/a/y/z`]: '4\n', [`${APP}/a0`]: '5\n', [`${APP}/é`]: '6\n', [`${APP}/😀`]: '7\n'}

test('files named next to a directory (a-b, a/x, a0) and beyond ASCII verify clean; one added beside each is extra, nothing else', async (t) => {
  const {moduleDir, root} = await installedTree(t, NEIGHBOURS)
  t.like(await verifyRelease(moduleDir, APP), {ok: true, modified: [], missing: [], extra: []})
  await chmod(root, 0o755)
  await chmod(join(root, 'a'), 0o755)
  for (const path of ['a-a', 'a.y', 'a/w', 'a/y0', 'a1', 'ê', '😁']) await writeFile(join(root, path), 'added\n')
  const result = await verifyRelease(moduleDir, APP)
  t.deepEqual(result.modified, [])
  t.deepEqual(result.missing, [])
  t.deepEqual(result.extra, ['a-a', 'a.y', 'a/w', 'a/y0', 'a1', 'ê', '😁'])
})

test('a record whose files are not in byte order (not one localpuppet writes) is verified all the same', async (t) => {
  const {moduleDir, root} = await installedTree(t, NEIGHBOURS)
  const recordFile = join(moduleDir, '.localpuppet/records', `${APP}.json`)
  const record = JSON.parse(await readFile(recordFile, 'utf8')) as {files: unknown[]}
  record.files.reverse()
  await writeFile(recordFile, JSON.stringify(record))
  t.like(await verifyRelease(moduleDir, APP), {ok: true, extra: []})
  await chmod(join(root, 'a'), 0o755)
  await writeFile(join(root, 'a/w'), 'added\n')
  await rm(join(root, 'a/x'))
  t.like(await verifyRelease(moduleDir, APP), {ok: false, modified: [], missing: ['a/x'], extra: ['a/w']})
})

test('a damaged install record is refused naming the file (65), not an internal error', async (t) => {
  const {moduleDir} = await installedTree(t, NEIGHBOURS)
  const recordFile = join(moduleDir, '.localpuppet/records', `${APP}.json`)
  const text = await readFile(recordFile, 'utf8')
  await writeFile(recordFile, text.slice(0, text.indexOf('"files"') + 200))
  const error = await t.throwsAsync(verifyRelease(moduleDir, APP))
  t.is((error as {exitCode?: number}).exitCode, 65)
  t.true(error!.message.startsWith(`${recordFile} is damaged`), error!.message)
})
