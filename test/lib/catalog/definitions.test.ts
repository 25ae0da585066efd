import test from 'ava'

import {autoloadFiles, readDefinitions, whyNotLoadable} from '../../../src/lib/catalog/definitions.js'
import {tempDir, writeTree} from '../../helpers/temp.js'

test('Puppet looks for a::b::c in a/manifests/b/c.pp, a/manifests/b.pp and a/manifests/init.pp', (t) => {
  t.deepEqual(autoloadFiles('a::b::c'), ['a/manifests/b/c.pp', 'a/manifests/b.pp', 'a/manifests/init.pp'])
  t.deepEqual(autoloadFiles('a'), ['a/manifests/init.pp'])
  t.is(whyNotLoadable('a::b::c', 'a/manifests/b.pp'), null)
  t.is(whyNotLoadable('a::x', 'a/manifests/init.pp'), null)
  t.regex(whyNotLoadable('augeas', 'augeas_core/manifests/init.pp')!, /^it is in augeas_core\/manifests\/init\.pp, where Puppet's autoloader does not look for it/)
})

test('an earlier modulepath entry hides a module, even one without manifests; invalid directory names are listed, not loaded', async (t) => {
  const dir = await tempDir(t)
  await writeTree(dir, {
    'one/web/files/x': '',
    'two/web/manifests/init.pp': 'class web {}\n',
    'two/my-mod/manifests/init.pp': 'class my_mod {}\n',
    'two/ok/manifests/init.pp': 'class ok {}\nclass ok::inner {}\n',
    'two/ok/manifests/misc.pp': 'class ok::elsewhere {}\n',
  })
  const found = readDefinitions([`${dir}/one`, `${dir}/two`])
  t.deepEqual(
    found.definitions.map((d) => [d.name, d.notLoadable === null]),
    [
      ['my_mod', false],
      ['ok', true],
      ['ok::inner', true],
      ['ok::elsewhere', false],
    ],
  )
  t.deepEqual([...found.modules.keys()], ['web', 'ok'])
  t.false(found.manifests.some((file) => file.includes('my-mod')), 'Puppet never parses a module it does not load')
})
