import {join} from 'node:path'

import test from 'ava'

import {readModuleData} from '../../../src/lib/catalog/module-data.js'
import {tempDir, writeTree} from '../../helpers/temp.js'

const HIERA = `version: 5
defaults: {datadir: data, data_hash: yaml_data}
hierarchy:
  - {name: Node, path: 'nodes/%{trusted.certname}.yaml'}
  - name: Family
    path: '%{facts.os.family}.yaml'
  - {name: Globbed, glob: 'extra/*.yaml'}
  - {name: Json, path: common.json, data_hash: json_data}
  - {name: Common, path: common.yaml}
`

test('levels that depend on no fact give values; node-dependent ones only "maybe", for the keys their files hold', async (t) => {
  const dir = await tempDir(t)
  await writeTree(dir, {
    'mod/hiera.yaml': HIERA,
    'mod/data/common.yaml': 'mod::a: 1\nmod::b: "%{facts.fqdn}"\nmod::shared: common\nother::x: 1\n',
    'mod/data/common.json': '{"mod::from_json": true}',
    'mod/data/extra/one.yaml': 'mod::globbed: [1]\n',
    'mod/data/RedHat.yaml': 'mod::shared: redhat\nmod::only_redhat: 1\n',
    'mod/data/nodes/web01.yaml': 'mod::per_node: 1\n',
  })
  const data = readModuleData(join(dir, 'mod'), 'mod')
  t.deepEqual(data.lookup('mod::a'), {kind: 'value', value: {value: 1, file: 'mod/data/common.yaml', line: 1, level: 'Common', interpolated: false}, mayOverride: []})
  t.like(data.lookup('mod::b'), {kind: 'value', value: {interpolated: true}})
  t.like(data.lookup('mod::shared'), {kind: 'value', value: {value: 'common'}, mayOverride: ['Family']})
  t.like(data.lookup('mod::from_json'), {kind: 'value', value: {value: true, level: 'Json'}})
  t.like(data.lookup('mod::globbed'), {kind: 'value', value: {value: [1], level: 'Globbed', file: 'mod/data/extra/one.yaml'}})
  t.deepEqual(data.lookup('mod::only_redhat'), {kind: 'maybe', levels: ['Family']})
  // A fact may hold a slash: `%{facts.os.family}.yaml` might name nodes/web01.yaml too.
  t.deepEqual(data.lookup('mod::per_node'), {kind: 'maybe', levels: ['Node', 'Family']})
  t.deepEqual(data.lookup('mod::nowhere'), {kind: 'none'})
  t.deepEqual(data.lookup('other::x'), {kind: 'none'}, 'module data answers only keys in its own namespace')
})

test('what cannot be read statically may give any key: a custom backend, another hiera.yaml version, a data_provider function', async (t) => {
  const dir = await tempDir(t)
  await writeTree(dir, {
    'custom/hiera.yaml': 'version: 5\nhierarchy:\n  - {name: Vault, lookup_key: vault_lookup}\n  - {name: Common, path: common.yaml}\n',
    'custom/data/common.yaml': 'custom::a: 1\n',
    'old/hiera.yaml': 'version: 4\nhierarchy: []\n',
    'fn/metadata.json': '{"name": "x-fn", "data_provider": "function"}',
    'plain/manifests/init.pp': 'class plain {}\n',
    'broken/hiera.yaml': 'version: 5\nhierarchy:\n  - {name: Common, path: common.yaml}\n',
    'broken/data/common.yaml': 'broken::a: [\n',
  })
  t.like(readModuleData(join(dir, 'custom'), 'custom').lookup('custom::a'), {kind: 'value', mayOverride: ['Vault']})
  t.deepEqual(readModuleData(join(dir, 'custom'), 'custom').lookup('custom::b'), {kind: 'maybe', levels: ['Vault']})
  t.is(readModuleData(join(dir, 'old'), 'old').lookup('old::a').kind, 'maybe')
  t.is(readModuleData(join(dir, 'fn'), 'fn').lookup('fn::a').kind, 'maybe')
  t.is(readModuleData(join(dir, 'plain'), 'plain').lookup('plain::a').kind, 'none')
  t.is(readModuleData(join(dir, 'broken'), 'broken').lookup('broken::a').kind, 'maybe')
})

test('a hiera.yaml without a hierarchy reads common.yaml from data/', async (t) => {
  const dir = await tempDir(t)
  await writeTree(dir, {'m/hiera.yaml': 'version: 5\n', 'm/data/common.yaml': 'm::a: x\n'})
  t.like(readModuleData(join(dir, 'm'), 'm').lookup('m::a'), {kind: 'value', value: {value: 'x'}})
})
