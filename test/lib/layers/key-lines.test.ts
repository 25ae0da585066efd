import test from 'ava'
import fc from 'fast-check'

import {keyLines} from '../../../src/lib/layers/key-lines.js'
import {dumpYaml, lineOfKey} from '../../../src/lib/yaml.js'

const PATHS = [['classes'], ['classes', 'ntp'], ['classes', 'ntp', 'servers'], ['classes', 'web::vhost', 'port'], ['parameters', 'tier'], ['remove', 'classes.motd'], ['layers', 'site/dc1'], ['environment'], ['nope'], ['classes', 'nope']]

test('keyLines finds the line lineOfKey finds, in block and flow style, quoted keys, repeated keys and a document the parser refuses', (t) => {
  const texts = [
    'classes:\n  ntp:\n    servers: [a]\n  "web::vhost": {port: 1}\nparameters:\n  tier: x\nremove:\n  - classes.motd\nlayers: [site/dc1]\nenvironment: production\n',
    "classes: {ntp: {servers: [a]}, 'web::vhost': {port: 1}}\nparameters: {tier: x}\nremove: [classes.motd]\n",
    'parameters:\n  tier: 1\nparameters:\n  tier: 2\n',
    'classes:\n  ntp:\n   servers: [a\n',
  ]
  for (const text of texts) {
    const lineOf = keyLines(text)
    for (const path of PATHS) t.is(lineOf(path), lineOfKey(text, path), `${JSON.stringify(text)} ${path.join('.')}`)
  }
})

test('property: keyLines agrees with lineOfKey on generated layers', (t) => {
  const key = fc.constantFrom('classes', 'parameters', 'ntp', 'servers', 'tier', 'web::vhost', 'port', 'remove', 'a b', "it's")
  const value: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
    node: fc.oneof({depthSize: 'small'}, fc.integer(), fc.string({maxLength: 5}), fc.array(tie('node'), {maxLength: 3}), fc.dictionary(key, tie('node'), {maxKeys: 3})),
  })).node
  fc.assert(
    fc.property(fc.dictionary(key, value, {maxKeys: 4}), fc.boolean(), fc.array(fc.array(key, {minLength: 1, maxLength: 3}), {maxLength: 8}), (doc, flow, paths) => {
      const text = flow ? JSON.stringify(doc) : dumpYaml(doc)
      const lineOf = keyLines(text)
      for (const path of paths) t.is(lineOf(path), lineOfKey(text, path), `${text} ${path.join('.')}`)
    }),
    {numRuns: 300},
  )
})

test('a layer of 20,000 values gets every line right (each from one parse of the document)', (t) => {
  const text = `parameters:\n${Array.from({length: 20_000}, (_, i) => `  p${i}: ${i}\n`).join('')}`
  const lineOf = keyLines(text)
  t.is(lineOf(['parameters', 'p0']), 2)
  t.is(lineOf(['parameters', 'p19999']), 20_001)
})
