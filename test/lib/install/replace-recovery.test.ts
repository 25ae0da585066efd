import {existsSync} from 'node:fs'
import {readFile} from 'node:fs/promises'
import {join} from 'node:path'

import test from 'ava'

import {Staging} from '../../../src/lib/install/staging.js'
import {tempDir, writeTree} from '../../helpers/temp.js'

// An install replacing a trunk moves the old one to .localpuppet/replaced first; if it is
// killed before the new one is in place, the next install puts the old one back.
test('a trunk moved aside by a killed install comes back; one already replaced is cleared', async (t) => {
  const modules = await tempDir(t)
  await writeTree(modules, {
    '.localpuppet/replaced/foo/trunk/foo/manifests/init.pp': 'class foo { } # the old trunk\n',
    '.localpuppet/replaced/bar/branches/x/bar/manifests/init.pp': 'class bar { } # replaced already\n',
    'bar/branches/x/bar/manifests/init.pp': 'class bar { } # the new branch\n',
  })
  const staging = await Staging.open(modules)
  await staging.close()
  t.is(await readFile(join(modules, 'foo/trunk/foo/manifests/init.pp'), 'utf8'), 'class foo { } # the old trunk\n')
  t.is(await readFile(join(modules, 'bar/branches/x/bar/manifests/init.pp'), 'utf8'), 'class bar { } # the new branch\n')
  t.false(existsSync(join(modules, '.localpuppet/replaced')))
})
