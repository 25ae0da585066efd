import {readdir} from 'node:fs/promises'
import {join} from 'node:path'

import test from 'ava'

import {LocalpuppetError} from '../../../src/lib/errors.js'
import {publishArchives} from '../../../src/lib/repository/publish.js'
import {tempDir, writeTree} from '../../helpers/temp.js'

test('publish --layers refuses (65, naming the file and key) a layer that marks a secret: layers are stored in plain text for every node; nothing published', async (t) => {
  const dir = await tempDir(t)
  await writeTree(join(dir, 'layers'), {
    'role/web.yaml': 'classes:\n  nginx: {}\n',
    'site/dc1.yaml': 'classes:\n  db:\n    port: 5432\n    password: !secret hunter2\n',
  })
  const repo = join(dir, 'repo')
  const error = await t.throwsAsync(publishArchives({repo, archives: [], layers: join(dir, 'layers')}))
  t.is((error as LocalpuppetError).exitCode, 65)
  t.is(error!.message, `${join(dir, 'layers', 'site', 'dc1.yaml')}: classes.db.password: layer site/dc1 marks a secret (!secret), but layers are published in plain text for every node; nothing published`)
  t.false(error!.message.includes('hunter2'))
  t.deepEqual(await readdir(dir), ['layers'])
})

test("pack refuses (65, naming the file and key) a release whose own layer.yaml marks a secret: the archive is published in plain text; nothing packed", async (t) => {
  const {packRelease} = await import('../../../src/lib/archive/pack.js')
  const dir = await tempDir(t)
  const moduleDir = join(dir, 'modules')
  await writeTree(moduleDir, {
    'db/tags/1.0.0/db/manifests/init.pp': 'class db(Sensitive[String] $password) {}\n',
    'db/tags/1.0.0/layer.yaml': 'classes:\n  db:\n    password: !secret hunter2\n',
  })
  const error = await t.throwsAsync(packRelease({moduleDir, ref: 'db/tags/1.0.0', output: join(dir, 'db.tar.gz')}))
  t.is((error as LocalpuppetError).exitCode, 65)
  t.is(error!.message, "db/tags/1.0.0/layer.yaml: classes.db.password: the release's layer marks a secret (!secret), but a release archive is published in plain text for every node; nothing packed")
  t.deepEqual(await readdir(dir), ['modules'])
})
