import {join} from 'node:path'

import test from 'ava'

import {validateInputs} from '../../../src/lib/validate/validate-inputs.js'
import {tempDir, writeTree} from '../../helpers/temp.js'

test('validate checks each node\'s computed document and names the layer a wrong value came from; layers/ is never read as inputs', async (t) => {
  const dir = await tempDir(t)
  await writeTree(dir, {
    'modules/web/tags/1.0.0/web/manifests/init.pp': 'class web(Integer $port = 80, String $docroot = "/srv") {}\n',
    'modules/web/tags/1.0.0/layer.yaml': 'classes:\n  web:\n    docroot: /srv/www\n',
    'nodes/layers/site/dc1.yaml': 'classes:\n  web:\n    port: 8080\n',
    'nodes/layers/site/dc2.yaml': 'classes:\n  web:\n    port: "8080"\n',
    'nodes/layers/role/bad.yaml': 'classes:\n  web:\n    prot: 1\n',
    'nodes/web1.yaml': 'app: web/tags/1.0.0\nlayers: [site/dc1]\n',
    'nodes/web2.yaml': 'app: web/tags/1.0.0\nlayers: [site/dc2]\n',
    'nodes/web3.yaml': 'app: web/tags/1.0.0\nlayers:\n  - role/bad\n',
    'nodes/web4.yaml': 'app: web/tags/1.0.0\nlayers:\n  - site/dc9\n',
  })
  const report = await validateInputs([join(dir, 'nodes')], {moduleDir: join(dir, 'modules'), puppet: null})
  t.deepEqual(report.inputs.map((input) => input.file), ['web1', 'web2', 'web3', 'web4'].map((node) => join(dir, `nodes/${node}.yaml`)))
  const messages = report.inputs.map((input) => input.problems.map((problem) => problem.message))
  t.deepEqual(messages[0], [])
  t.deepEqual(messages[1], [`${join(dir, 'nodes/layers/site/dc2.yaml')}:3: layer site/dc2: Class[Web]: parameter 'port' expects an Integer value, got String (web/tags/1.0.0/web/manifests/init.pp:1)`])
  t.deepEqual(report.inputs[1].problems[0].file, join(dir, 'nodes/layers/site/dc2.yaml'))
  t.regex(messages[2][0], /role\/bad\.yaml:3: layer role\/bad: class web has no parameter prot \(did you mean port\?\)/)
  t.deepEqual(messages[3], [`${join(dir, 'nodes/web4.yaml')}:3: layer node: layers: unknown layer site/dc9 (no site/dc9.yaml in ${join(dir, 'nodes/layers')})`])
})
