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
