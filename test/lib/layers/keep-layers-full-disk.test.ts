import {readdir, readFile} from 'node:fs/promises'
import {join} from 'node:path'

import test from 'ava'

import {IoError} from '../../../src/lib/errors.js'
import {keepLayers} from '../../../src/lib/layers/fetch-layers.js'
import {smallFileSystem} from '../../helpers/full-disk.js'

/*
 * Kept layers on a full disk: an offline run merges what it finds, so a fetch that cannot
 * keep all of its layers must keep none of them (never this fetch's site layer with the
 * last fetch's role layer), and leave no temporary file.
 */

const layer = (name: string, text: string) => ({name, bytes: Buffer.from(text), text, sha256: 'a'.repeat(64), location: `repo/layers/${name}.yaml`})

test.serial('a full disk while keeping layers: 74 naming the layer, the layers kept before all as they were (none of this fetch), no temporary file', async (t) => {
  const {mount} = await smallFileSystem(t, 64)
  const dir = join(mount, 'layers')
  await keepLayers(dir, [layer('site/dc1', 'parameters: {port: 80}\n'), layer('role/web', 'classes: {nginx: {}}\n')], false)
  const listing = async () => (await readdir(dir, {recursive: true})).sort()
  const before = await listing()
  // The first fits, the second does not.
  const error = await t.throwsAsync(keepLayers(dir, [layer('site/dc1', 'parameters: {port: 8080}\n'), layer('role/web', `classes: {nginx: {}}\n#${'x'.repeat(128 * 1024)}\n`)], false), {instanceOf: IoError})
  t.is(error!.exitCode, 74)
  t.regex(error!.message, new RegExp(`^layer ${dir}/role/web\\.yaml: no space left on the device`))
  t.is(await readFile(join(dir, 'site/dc1.yaml'), 'utf8'), 'parameters: {port: 80}\n', 'not this fetch\'s site layer beside the last fetch\'s role layer')
  t.is(await readFile(join(dir, 'role/web.yaml'), 'utf8'), 'classes: {nginx: {}}\n')
  t.deepEqual(await listing(), before, 'no temporary file')
})
