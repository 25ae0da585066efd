import test from 'ava'
import fc from 'fast-check'

import {matchingParen, scanManifest} from '../../../src/lib/catalog/manifest-scan.js'

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

// Issue 33: the scanner was quadratic in a manifest's classes (each line number counted from
// the start of the file), in unclosed `class x (` (each scanned to the end of the file) and in
// the blanks of a heredoc's lines (its end pattern backtracked cubically). What it finds is the same.
test('many classes, unclosed parameter lists and long runs of blanks: every class found, at its line', (t) => {
  const many = Array.from({length: 3000}, (_, i) => `class c${i} (\n  $a = ${i},\n) {}\n`).join('')
  const found = scanManifest(many, 'x.pp')
  t.is(found.length, 3000)
  t.deepEqual([found[0].line, found[2999].line, found[2999].parameters], [1, 2999 * 3 + 1, [{name: 'a', type: null, default: '2999'}]])
  t.deepEqual(scanManifest(`${'class a ('.repeat(2000)}\nclass real {}\n`, 'x.pp').map((d) => d.name), ['real'])
  t.deepEqual(scanManifest(`class real {}\n${'class a ('.repeat(2000)}\n`, 'x.pp').map((d) => d.name), ['real'])
  t.deepEqual(scanManifest(`$x = @(END)\n${' \t'.repeat(20_000)}x\n${'@('.repeat(20_000)}\n\t |  - END\nclass after {}\n`, 'x.pp').map((d) => d.name), ['after'])
  for (const end of ['END', '|END', '  -END  ', '| - END']) t.deepEqual(scanManifest(`$x = @(END)\n  class fake {}\n${end}\nclass after {}\n`, 'x.pp').map((d) => d.name), ['after'], end)
})

test('property: the brackets matchingParen found before, stepped over, give what a scan of its own gives', (t) => {
  const pieces = fc.constantFrom('(', ')', '[', ']', '{', '}', 'x', ',', "'", '"', '#', '\n', '/*', '*/', '/', '\\', '@(END)', 'END\n')
  fc.assert(
    fc.property(fc.array(pieces, {maxLength: 80}), (parts) => {
      const text = parts.join('')
      const known = new Map<number, number>()
      for (let i = 0; i < text.length; i++) if (text[i] === '(') t.is(matchingParen(text, i, known), matchingParen(text, i), `${JSON.stringify(text)} at ${i}`)
    }),
    {numRuns: 2000},
  )
})
