import test from 'ava'

import {metadataFindings, readModuleMetadata, requirementFindings} from '../../../src/lib/validate/module-requirements.js'
import {tempDir, writeTree} from '../../helpers/temp.js'

const FULL = {name: 'acme-x', version: '1.0.0', author: 'acme', license: 'MIT', source: 's', dependencies: []}

test('metadata.json as Puppet judges it: missing keys always refused, invalid JSON only under strict: error, empty only on Puppet 7', async (t) => {
  const dir = await tempDir(t)
  await writeTree(dir, {
    'good/metadata.json': JSON.stringify(FULL),
    'nothing/metadata.json': '{}',
    'list/metadata.json': '[]',
    'nosource/metadata.json': JSON.stringify({...FULL, source: undefined, license: null}),
    'deps/metadata.json': JSON.stringify({...FULL, dependencies: 'none'}, null, 2),
    'scalar/metadata.json': '"x"',
    'broken/metadata.json': '{\n  "name": "acme-broken",\n',
    'empty/metadata.json': '',
    'nometadata/manifests/init.pp': 'class nometadata {}\n',
  })
  const metadata = await readModuleMetadata(dir)
  const shown = (findings: ReturnType<typeof metadataFindings>) => findings.map((f) => `${f.severity} ${f.message.replace(/ \(.*?\);/, ' (...);')}`)
  t.deepEqual(shown(metadataFindings(metadata, 'r', 'error', '7.23.0')), [
    'problem r/broken/metadata.json:3: module broken: metadata.json is not valid JSON (...); under strict: error Puppet refuses the module (Could not find class broken)',
    'problem r/deps/metadata.json:7: module deps: metadata.json "dependencies" is not a list; Puppet refuses the module whatever strict says',
    'problem r/empty/metadata.json: module empty: metadata.json is empty, which Puppet 7 reads as invalid JSON; under strict: error Puppet refuses the module (Could not find class empty)',
    'problem r/nosource/metadata.json:1: module nosource: metadata.json lacks "source", "license"; Puppet refuses the module whatever strict says (No source module metadata provided for nosource)',
    'problem r/scalar/metadata.json:1: module scalar: metadata.json is not a JSON object; Puppet cannot load the module',
  ])
  t.deepEqual(
    shown(metadataFindings(metadata, 'r', 'warning', '8.10.0')).filter((line) => /broken|empty/.test(line)),
    ['warning r/broken/metadata.json:3: module broken: metadata.json is not valid JSON (...); under strict: warning Puppet loads the module without it, under strict: error it refuses the module'],
  )
})

test('requirements are judged only from JSON, against the implementation named', async (t) => {
  const dir = await tempDir(t)
  await writeTree(dir, {'future/metadata.json': JSON.stringify({...FULL, requirements: [{name: 'puppet', version_requirement: '>= 9.0.0'}, {name: 'openvox', version_requirement: '>= 8.0.0'}]}), 'broken/metadata.json': '{'})
  const metadata = await readModuleMetadata(dir)
  t.deepEqual(requirementFindings(metadata, 'r', {implementation: 'openvox', version: '8.19.0', path: '/p'}), [])
  t.like(requirementFindings(metadata, 'r', {implementation: 'puppet', version: '8.10.0', path: '/p'}), [{severity: 'problem', line: 1}])
})
