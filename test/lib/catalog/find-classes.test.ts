import {join} from 'node:path'

import test from 'ava'

import {missingClasses} from '../../../src/lib/catalog/find-classes.js'
import {tempDir, writeTree} from '../../helpers/temp.js'

test('missingClasses finds what the autoloader finds (any spelling, nested, hidden modules, the main manifest) and explains the rest', async (t) => {
  const dir = await tempDir(t)
  await writeTree(dir, {
    'one/web/files/x': '',
    'two/web/manifests/init.pp': 'class web {}\n',
    'two/ntp/manifests/init.pp': '# class ntpp {\nclass ntp(\n  $x = 1,\n) inherits ntp::params {\n  class inner {}\n}\n',
    'two/ntp/manifests/params.pp': 'class ntp::params{}\n',
    'two/ntp/manifests/conf.pp': 'define ntp::conf() {}\n',
    'two/ntp/manifests/misplaced.pp': 'class ntp::elsewhere {}\n',
    'site.pp': 'class mysite {}\n',
  })
  const modulepath = [join(dir, 'one'), join(dir, 'two')]
  t.deepEqual(await missingClasses(['ntp', '::ntp::params', 'ntp::inner', 'mysite'], modulepath, join(dir, 'site.pp')), [])
  t.deepEqual(await missingClasses(['ntpp', 'web', 'ntp::conf', 'ntp::elsewhere', 'mysite'], modulepath, null), [
    {name: 'ntpp', message: 'class ntpp is not defined on the modulepath (Puppet looks in ntpp/manifests/init.pp); did you mean ntp?'},
    // `one` has a web module without manifests: it hides two's, as in Puppet.
    {name: 'web', message: 'class web is not defined on the modulepath (Puppet looks in web/manifests/init.pp)'},
    {name: 'ntp::conf', message: 'ntp::conf is a defined type, not a class'},
    {name: 'ntp::elsewhere', message: "class ntp::elsewhere cannot be loaded (Puppet: Could not find class ntp::elsewhere): it is in ntp/manifests/misplaced.pp, where Puppet's autoloader does not look for it (it reads ntp/manifests/elsewhere.pp, ntp/manifests/init.pp)"},
    {name: 'mysite', message: 'class mysite is not defined on the modulepath (Puppet looks in mysite/manifests/init.pp)'},
  ])
})
