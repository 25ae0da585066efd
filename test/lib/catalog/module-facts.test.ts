import test from 'ava'

import {moduleFacts} from '../../../src/lib/catalog/module-facts.js'
import {tempDir, writeTree} from '../../helpers/temp.js'

test('custom facts by literal name, prefixes of names built at run time, and external facts by their keys', async (t) => {
  const dir = await tempDir(t)
  await writeTree(dir, {
    'a/lib/facter/one.rb': "Facter.add(:acme_role) do\n  setcode { 'web' }\nend\nFacter.add('Acme_Zone') { setcode { 1 } }\n",
    'a/lib/facter/sub/two.rb': 'Facter.add("acme_site") {}\nPuppet.runtime[:facter].add("pci_#{driver}") {}\n',
    'b/plugins/facter/old.rb': 'Facter.add(:old_style) {}\n',
    'b/facts.d/static.yaml': 'from_yaml: 1\n',
    'b/facts.d/static.txt': 'from_txt=1\n# comment=2\n',
    'b/facts.d/static.json': '{"from_json": true}\n',
  })
  const found = await moduleFacts(dir)
  t.deepEqual([...found.names].sort(), ['acme_role', 'acme_site', 'acme_zone', 'from_json', 'from_txt', 'from_yaml', 'old_style'])
  t.deepEqual(found.prefixes, ['pci_'])
  t.is(found.unknowable, null)
})

test('a fact named by a variable, or an executable external fact, makes the names unknowable, naming the file', async (t) => {
  const dir = await tempDir(t)
  await writeTree(dir, {'a/lib/facter/dynamic.rb': 'names.each { |name| Facter.add(name) {} }\n'})
  t.is((await moduleFacts(dir)).unknowable, 'a/lib/facter/dynamic.rb')
  const other = await tempDir(t)
  await writeTree(other, {'b/facts.d/script.sh': {mode: 0o755, content: '#!/bin/sh\necho x=1\n'}})
  t.is((await moduleFacts(other)).unknowable, 'b/facts.d/script.sh')
})
