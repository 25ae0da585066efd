import {readdir, readFile} from 'node:fs/promises'
import {join} from 'node:path'

import test from 'ava'

import {IoError} from '../../../src/lib/errors.js'
import {publishArchives} from '../../../src/lib/repository/publish.js'
import {deltaSetup} from '../../helpers/delta.js'
import {fillLeaving, smallFileSystem} from '../../helpers/full-disk.js'

/*
 * The objects a publish writes (delta/publish-objects.ts) on a disk with room for the
 * publish lock but not for them: 74 naming the repository, and the repository as it was:
 * no object, no objects/ directory, no temporary file, the index and signature unchanged.
 */

test.serial("publish onto a disk too full for the tag's objects: 74 naming the repository, no object or temporary file left, the index as it was", async (t) => {
  const s = await deltaSetup(t, {perModule: 60, rewritten: 20})
  const {mount} = await smallFileSystem(t, 4096)
  const repo = join(mount, 'repo')
  await publishArchives({repo, archives: [s.archives.old]})
  const listing = async () => (await readdir(repo, {recursive: true})).sort()
  const before = await listing()
  const index = await readFile(join(repo, 'index.json'))
  await fillLeaving(mount, 16)
  const error = await t.throwsAsync(publishArchives({repo, archives: [s.archives.new]}), {instanceOf: IoError})
  t.is(error!.exitCode, 74)
  t.is(error!.message, `repository ${repo}: no space left on the device`)
  t.deepEqual(await listing(), before, 'no object, directory or temporary file of this publish')
  t.deepEqual(await readFile(join(repo, 'index.json')), index)
})
