import test from 'ava'


import fc from 'fast-check'
import yaml from 'js-yaml'

import {InputError} from '../../src/lib/errors.js'
import {exactIntegers} from '../helpers/exact.js'
import {MAX_YAML_BYTES, dumpYaml, lineOfKey, parseYaml} from '../../src/lib/yaml.js'

function inputError(t: import('ava').ExecutionContext, fn: () => unknown): InputError {
  const error = t.throws(fn, {instanceOf: InputError})
  t.is(error.exitCode, 65)
  return error
}

test('parseYaml keeps timestamps and dates as the strings they look like', (t) => {
  const doc = parseYaml('date: 2024-01-01\nstamp: 2001-12-14t21:59:43.10-05:00\nspaced: 2001-12-14 21:59:43.10 -5\n', 'input.yaml')
  t.deepEqual(doc, {date: '2024-01-01', stamp: '2001-12-14t21:59:43.10-05:00', spaced: '2001-12-14 21:59:43.10 -5'})
})

test('parseYaml reads YAML 1.2 core scalars: yes/on stay strings, true/null/numbers do not', (t) => {
  const doc = parseYaml('a: yes\nb: on\nc: true\nd: null\ne: ~\nf: 8080\ng: 1.5\nh: 0x1F\ni: .inf\nj: 012\n', 'input.yaml')
  t.deepEqual(doc, {a: 'yes', b: 'on', c: true, d: null, e: null, f: 8080, g: 1.5, h: 31, i: Number.POSITIVE_INFINITY, j: 12})
})

test('parseYaml supports merge keys, with local keys winning', (t) => {
  const text = ['base: &base', '  port: 80', '  host: a', 'site:', '  <<: *base', '  port: 8080', ''].join('\n')
  t.deepEqual(parseYaml(text, 'input.yaml'), {base: {port: 80, host: 'a'}, site: {port: 8080, host: 'a'}})
})

test('parseYaml reports syntax errors as file:line:col and exit 65', (t) => {
  t.is(inputError(t, () => parseYaml('a:\n  b: 1\n c: 2\n', 'input.yaml')).message, 'input.yaml:3:2: bad indentation of a mapping entry')
  t.is(inputError(t, () => parseYaml('a: 1\na: 2\n', '/etc/puppet/input.yaml')).message, '/etc/puppet/input.yaml:2:1: duplicated mapping key')
  t.regex(inputError(t, () => parseYaml('a: [1, 2\n', '<stdin>')).message, /^<stdin>:2:1: unexpected end of the stream/)
  // One line, no code frame: the message is printed as is.
  t.false(inputError(t, () => parseYaml('a: "\\q"\n', 'input.yaml')).message.includes('\n'))
})

for (const tagged of ['!!binary aGVsbG8=', '!!set {x}', '!!omap [{x: 1}]', '!!timestamp 2024-01-01', '!ruby/object:Foo {}', '!!js/function "() => 1"']) {
  test(`parseYaml refuses the explicit tag in ${JSON.stringify(tagged)}`, (t) => {
    const message = inputError(t, () => parseYaml(`a: ${tagged}\n`, 'input.yaml')).message
    t.regex(message, /^input\.yaml:1:\d+: unknown tag /)
  })
}

test('parseYaml refuses documents whose aliases expand to too many values', (t) => {
  const levels = ['l0: &l0 [x, x, x, x, x, x, x, x, x, x]']
  for (let i = 1; i <= 6; i++) levels.push(`l${i}: &l${i} [${Array.from({length: 10}, () => `*l${i - 1}`).join(', ')}]`)
  t.regex(inputError(t, () => parseYaml(levels.join('\n') + '\n', 'bomb.yaml')).message, /^bomb\.yaml: too many values/)
})

test('parseYaml refuses documents over the size limit before parsing them', (t) => {
  const big = `a: "${'x'.repeat(MAX_YAML_BYTES)}"\n`
  t.is(inputError(t, () => parseYaml(big, 'big.yaml')).message, 'big.yaml: larger than 8 MiB')
})

// Strings YAML 1.2 (js-yaml) or YAML 1.1 (Psych, which reads the ENC for Puppet) would
// take for a boolean, null, number, date, time or symbol if written unquoted.
const LOOKALIKES = [
  'yes', 'Yes', 'no', 'on', 'off', 'y', 'n', 'true', 'False', 'null', 'Null', '~', '',
  '2024-01-01', '2001-12-14t21:59:43.10-05:00', '12:30', '1:20:30', ':foo', '0x1F', '0o17', '017',
  '1e3', '1.5', '.5', '.inf', '-.inf', '.nan', '+12', '-0', '=',
  // YAML 1.1 only:
  'yEs', 'NuLl', 'oN', '1_000', '1,000', '0,', '1,2.5', '2024-1-1', '0b1_0', '0x_', '+1_0',
]

test('dumpYaml quotes strings that would read back as another type', (t) => {
  for (const value of LOOKALIKES) {
    const text = dumpYaml({key: value})
    t.true(/^key: (['"]).*\1\n$/.test(text), `${JSON.stringify(value)} is written quoted, got ${JSON.stringify(text)}`)
    t.deepEqual(parseYaml(text, 'x.yaml'), {key: value}, JSON.stringify(value))
    // js-yaml's default schema has YAML 1.1 timestamps: they must stay strings too.
    t.deepEqual(yaml.load(text), {key: value}, JSON.stringify(value))
  }
})

test('dumpYaml quotes lookalike mapping keys too', (t) => {
  for (const key of ['yes', 'null', '2024-01-01', '1_000', 'NuLl']) {
    const text = dumpYaml({[key]: 1})
    t.true(/^(['"]).*\1: 1\n$/.test(text), `${JSON.stringify(key)} key is written quoted, got ${JSON.stringify(text)}`)
    t.deepEqual(parseYaml(text, 'x.yaml'), {[key]: 1})
  }
})

test('dumpYaml writes a "<<" key so that it is not read as a merge key', (t) => {
  const value = {'<<': {a: 1}, b: {'<<': [{c: 1}]}}
  const text = dumpYaml(value)
  t.false(/^\s*'?<<'?:/m.test(text), text)
  t.deepEqual(parseYaml(text, 'x.yaml'), value)
  t.deepEqual(yaml.load(text), value)
})

test('dumpYaml leaves ordinary strings plain, keeps numbers and booleans unquoted', (t) => {
  t.is(dumpYaml({name: 'foo/tags/1.4.0', version: '1.4.0', port: 8080, ratio: 0.5, on: true, none: null}), [
    'name: foo/tags/1.4.0',
    'version: 1.4.0',
    'port: 8080',
    'ratio: 0.5',
    "'on': true",
    'none: null',
    '',
  ].join('\n'))
})

test('dumpYaml never folds long lines and never writes anchors', (t) => {
  const long = 'word '.repeat(100).trim()
  const shared = {a: 1}
  const text = dumpYaml({long, x: shared, y: shared})
  t.true(text.includes(`long: ${long}\n`))
  t.false(/[&*]ref_/.test(text))
  t.deepEqual(parseYaml(text, 'x.yaml'), {long, x: {a: 1}, y: {a: 1}})
})

test('dumpYaml writes numbers so they read back as the same numbers', (t) => {
  for (const n of [0, -0, 1, -1, 0.1, 1e-7, 5e-324, 1.5e300, 2 ** 53 - 1, 2 ** 53 + 2, 1e21, -1e21, Number.NaN, Infinity, -Infinity]) {
    const back = parseYaml(dumpYaml({n}), 'x.yaml') as {n: number | bigint}
    // Integers beyond 2^53 come back exact, as BigInts.
    t.true(Object.is(back.n, exactIntegers(n)), `${n} read back as ${back.n}`)
  }
})

const BLOCK = [
  '# input for web01',
  'app: foo/tags/1.4.0',
  'parameters:',
  '  foo:',
  '    bar: 1',
  '    port: 1',
  '  bar: 2',
  '',
  'classes:',
  '  foo:',
  '    # the port',
  '    port: 8080',
  "  'quoted key':",
  '  "double key": {}',
  'environment: production',
].join('\n')

test('lineOfKey finds nested keys in block YAML', (t) => {
  t.is(lineOfKey(BLOCK, ['app']), 2)
  t.is(lineOfKey(BLOCK, ['parameters']), 3)
  t.is(lineOfKey(BLOCK, ['parameters', 'foo', 'port']), 6)
  t.is(lineOfKey(BLOCK, ['classes', 'foo']), 10)
  t.is(lineOfKey(BLOCK, ['classes', 'foo', 'port']), 12)
  t.is(lineOfKey(BLOCK, ['classes', 'quoted key']), 13)
  t.is(lineOfKey(BLOCK, ['classes', 'double key']), 14)
  t.is(lineOfKey(BLOCK, ['environment']), 15)
  t.is(lineOfKey(BLOCK.replaceAll('\n', '\r\n'), ['classes', 'foo', 'port']), 12)
})

test('lineOfKey finds the child key, not a deeper key or a key of another parent with that name', (t) => {
  t.is(lineOfKey(BLOCK, ['parameters', 'bar']), 7)
  t.is(lineOfKey(BLOCK, ['parameters', 'port']), undefined)
  t.is(lineOfKey(BLOCK, ['classes', 'port']), undefined)
  t.is(lineOfKey(BLOCK, ['port']), undefined)
  t.is(lineOfKey(BLOCK, ['classes', 'bar']), undefined)
})

test('lineOfKey finds keys in flow style, keys containing ::, and items of a list', (t) => {
  t.is(lineOfKey('{app: foo/trunk,\n classes: {foo: {port: 1}}}\n', ['classes', 'foo', 'port']), 2)
  const text = 'app: nova/tags/1.0.0\nclasses:\n  nova::db::mysql:\n    password: x\n  "nova::api": {workers: 2,\n    bind: x}\n'
  t.is(lineOfKey(text, ['classes', 'nova::db::mysql']), 3)
  t.is(lineOfKey(text, ['classes', 'nova::db::mysql', 'password']), 4)
  t.is(lineOfKey(text, ['classes', 'nova::api', 'bind']), 6)
  t.is(lineOfKey('classes: [a,\n  nova::db::mysql]\n', ['classes', 'nova::db::mysql']), 2)
  t.is(lineOfKey('classes:\n- a\n- nova::db::mysql\n', ['classes', 'nova::db::mysql']), 3)
  t.is(lineOfKey('classes:\n  a: :\n  b: [\n', ['classes', 'a']), 2, 'a document the parser refuses is scanned line by line')
})

test('lineOfKey finds every key of any block mapping dumpYaml writes', (t) => {
  type Tree = {[key: string]: Tree | number}
  // Few key names, so the same name recurs at several depths and under several parents.
  const key = fc.constantFrom('a', 'b', 'port', 'foo', 'x y', 'yes', "it's")
  const tree = fc.letrec<{tree: Tree}>((tie) => ({
    tree: fc
      .uniqueArray(fc.tuple(key, fc.oneof({depthSize: 'small'}, fc.integer(), tie('tree'))), {selector: ([k]) => k, maxLength: 4})
      .map((entries) => Object.fromEntries(entries) as Tree),
  })).tree

  fc.assert(
    fc.property(tree, (doc) => {
      const text = dumpYaml(doc)
      // dumpYaml writes one key per line, in order: number the lines while walking the tree.
      let line = 0
      const walk = (node: Tree, path: string[]): void => {
        for (const [k, v] of Object.entries(node)) {
          line++
          const found = lineOfKey(text, [...path, k])
          if (found !== line) throw new Error(`${JSON.stringify([...path, k])}: expected line ${line}, got ${found} in\n${text}`)
          if (typeof v === 'object' && Object.keys(v).length > 0) walk(v, [...path, k])
        }
      }

      walk(doc, [])
    }),
    {numRuns: 300},
  )
  t.pass()
})
