import {mkdir, readdir, readFile} from 'node:fs/promises'
import {join} from 'node:path'

import test from 'ava'

import {keepIndex, keptIndexPath} from '../../../src/lib/conditional/kept-index.js'
import {IoError} from '../../../src/lib/errors.js'
import {smallFileSystem} from '../../helpers/full-disk.js'

/*
 * The kept copy of a repository's index (and its signature) on a full disk: 74 naming the
 * file, the copy kept before intact (a node asks for the index again, it never believes
 * half of one), no temporary file.
 */

test.serial('a full disk while keeping the index and its signature: 74 naming the kept file, the copy kept before intact, no temporary file', async (t) => {
  const {mount: moduleDir, fill} = await smallFileSystem(t, 64)
  await mkdir(join(moduleDir, '.localpuppet'))
  const key = 'https://repo.example/site/'
  await keepIndex(moduleDir, key, {bytes: Buffer.from('{"version":1}'), signature: Buffer.from('sig1'), validators: {etag: '"v1"'}})
  const path = keptIndexPath(moduleDir, key)
  const kept = await readFile(path)
  await fill()
  const error = await t.throwsAsync(keepIndex(moduleDir, key, {bytes: Buffer.from(`{"version":2,"pad":"${'x'.repeat(8192)}"}`), signature: Buffer.from('sig2'), validators: {etag: '"v2"'}}), {instanceOf: IoError})
  t.is(error!.exitCode, 74)
  t.is(error!.message, `kept repository index ${path}: no space left on the device`)
  t.deepEqual(await readFile(path), kept)
  t.deepEqual((await readdir(join(moduleDir, '.localpuppet'))).sort(), [path.split('/').pop()!])
})
