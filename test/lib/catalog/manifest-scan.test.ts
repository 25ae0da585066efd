import test from 'ava'
import fc from 'fast-check'

import {scanManifest} from '../../../src/lib/catalog/manifest-scan.js'

const MANIFEST = `# a class
class foo (
  Integer $port = 80, # the port
  Optional[String] $name = undef,
  Enum['a', 'b,c'] $mode = 'a',
  Hash $opts = { 'x' => [1, 2] },
  $required,
) inherits foo::params {
  $s = "class bar { \${port} }"
  if $x =~ /^{'/ { notify { 'x': } }
  $h = @(END)
    class fake {}
    | END
  class nested ($a = 1) { }
  class { 'other': }
}
define foo::thing (String $path) {
  file { $path: }
}
class foo::params {}
`

test('classes and defined types with their parameters, types, defaults and lines', (t) => {
  const found = scanManifest(MANIFEST, 'foo/manifests/init.pp')
  t.deepEqual(
    found.map((d) => [d.kind, d.name, d.line]),
    [
      ['class', 'foo', 2],
      ['class', 'foo::nested', 14],
      ['define', 'foo::thing', 17],
      ['class', 'foo::params', 20],
    ],
  )
  t.deepEqual(found[0].parameters, [
    {name: 'port', type: 'Integer', default: '80'},
    {name: 'name', type: 'Optional[String]', default: 'undef'},
    {name: 'mode', type: "Enum['a', 'b,c']", default: "'a'"},
    {name: 'opts', type: 'Hash', default: "{ 'x' => [1, 2] }"},
    {name: 'required', type: null, default: null},
  ])
  t.true(found.every((d) => d.file === 'foo/manifests/init.pp'))
})

test('strings, comments, heredocs and resource-like class declarations are not definitions', (t) => {
  const names = scanManifest(MANIFEST, 'x.pp').map((d) => d.name)
  t.false(names.includes('bar'), 'inside a string')
  t.false(names.includes('fake'), 'inside a heredoc')
  t.false(names.includes('other'), "class { 'other': } declares, it does not define")
  t.deepEqual(scanManifest("# class commented {}\n/* class block {} */\nclass real {}\n", 'x.pp').map((d) => d.name), ['real'])
})

test('property: the scanner never throws, whatever the text', (t) => {
  const pieces = fc.constantFrom('class ', 'define ', 'foo', '::', '(', ')', '{', '}', '$a', ' = ', ',', "'", '"', '#', '\n', '/*', '*/', '@(END)', 'END', '=~', '/', 'inherits ', '[', ']')
  fc.assert(
    fc.property(fc.array(fc.oneof(pieces, fc.string()), {maxLength: 60}), (parts) => {
      const found = scanManifest(parts.join(''), 'x.pp')
      t.true(Array.isArray(found))
    }),
    {numRuns: 500},
  )
})
