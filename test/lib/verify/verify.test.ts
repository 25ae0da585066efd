import {chmod, mkdir, readFile, rm, writeFile} from 'node:fs/promises'
import {dirname, join} from 'node:path'

import test from 'ava'

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

test('verify of a release larger than a batch of checks reports every change in every batch, and each only once', async (t) => {
  const dir = await tempDir(t)
  const src = join(dir, 'src')
  await writeReleases(src, {[APP]: null})
  const files = manyFiles(5000)
  await writeTree(src, files)
  const archive = join(dir, 'big.tar.gz')
  await packRelease({moduleDir: src, ref: APP, output: archive})
  const moduleDir = join(dir, 'modules')
  await mkdir(moduleDir)
  const {stream, label} = await openArchive(archive)
  await installArchive(stream, label, {moduleDir, trustDir: null})
  const record = (await readInstallRecord(moduleDir, APP))!
  t.is(record.files.length, 5001)
  t.true((await verifyRelease(moduleDir, APP)).ok)

  // One change in the first, the second and the last batch (2,048 files each), a file
  // gone, one added, an empty directory gone and one added.
  const root = join(moduleDir, APP)
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
