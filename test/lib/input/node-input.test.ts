import {createHash} from 'node:crypto'
import {join} from 'node:path'
import {Readable} from 'node:stream'

import test from 'ava'
import fc from 'fast-check'

import {InputError, LocalpuppetError, NotFoundError, ReleaseError} from '../../../src/lib/errors.js'
import {PROVENANCE_PARAMETERS, parseNodeInput} from '../../../src/lib/input/node-input.js'
import {isValidClassName, isValidEnvironmentName, isValidParameterName} from '../../../src/lib/input/puppet-names.js'
import {readNodeInput} from '../../../src/lib/input/read-input.js'
import {dumpYaml} from '../../../src/lib/yaml.js'
import {exactIntegers} from '../../helpers/exact.js'
import {tempDir, writeTree} from '../../helpers/temp.js'

/** The LocalpuppetError parseNodeInput throws for `text`; fails the test otherwise. */
function refusal(text: string, source = 'input.yaml'): LocalpuppetError {
  try {
    parseNodeInput(text, source)
  } catch (error) {
    if (error instanceof LocalpuppetError) return error
    throw error
  }

  throw new Error(`expected ${JSON.stringify(text)} to be refused`)
}

// --- valid input ------------------------------------------------------------------------------

test('the issue example parses: app, classes map with a null entry, parameters', (t) => {
  const text = 'app: foo/tags/1.4.0\nclasses:\n  foo:\n    port: 8080\n  platform:\nparameters:\n  datacenter: ams1\n'
  const input = parseNodeInput(text, '/etc/puppet/input.yaml')
  t.is(input.source, '/etc/puppet/input.yaml')
  t.deepEqual(input.app, {kind: 'tag', app: 'foo', tag: '1.4.0', text: 'foo/tags/1.4.0'})
  t.deepEqual(input.classes, {foo: {port: 8080}, platform: null})
  t.deepEqual(input.parameters, {datacenter: 'ams1'})
  t.is(input.environment, undefined)
  t.deepEqual(input.raw, {app: 'foo/tags/1.4.0', classes: {foo: {port: 8080}, platform: null}, parameters: {datacenter: 'ams1'}})
  t.is(input.digest, `sha256:${createHash('sha256').update(text).digest('hex')}`)
})

test('classes as a list of names, namespaced names included, and an environment', (t) => {
  const input = parseNodeInput('app: foo@^1.2\nclasses:\n  - foo\n  - foo::bar_baz\n  - platform2\nenvironment: staging_2\n', 'input.yaml')
  t.deepEqual(input.classes, ['foo', 'foo::bar_baz', 'platform2'])
  t.is(input.environment, 'staging_2')
  t.is(input.app.kind, 'range')
})

test('only app is required; empty classes and parameters are left out', (t) => {
  const input = parseNodeInput('app: app/foo/trunk\nclasses:\nparameters: ~\n', 'input.yaml')
  t.deepEqual(input.app, {kind: 'trunk', app: 'foo', text: 'app/foo/trunk'})
  t.false('classes' in input)
  t.false('parameters' in input)
})

test('parameter values of any YAML type are kept as parsed; timestamps stay strings', (t) => {
  const input = parseNodeInput('app: foo/trunk\nparameters:\n  when: 2024-01-02\n  n: 1.5\n  on: yes\n  list: [1, "two"]\n  _x: {a: null}\n', 'input.yaml')
  // Core schema: `yes` is a string, as in YAML 1.2; the date is not turned into a Date.
  t.deepEqual(input.parameters, {when: '2024-01-02', n: 1.5, on: 'yes', list: [1, 'two'], _x: {a: null}})
})

test('the digest changes with the bytes, not only the data', (t) => {
  const a = parseNodeInput('app: foo/trunk\n', 'input.yaml')
  const b = parseNodeInput('app: foo/trunk # same data\n', 'input.yaml')
  t.deepEqual(a.raw, b.raw)
  t.not(a.digest, b.digest)
})

// --- keys -------------------------------------------------------------------------------------------

test('an unknown key is 65, named with its line and a did-you-mean', (t) => {
  const error = refusal('app: foo/trunk\n\nclases:\n  - foo\n')
  t.true(error instanceof InputError)
  t.is(error.exitCode, 65)
  t.is(error.message, 'input.yaml:3: unknown key "clases" (did you mean classes?); allowed: app, layers, classes, parameters, environment, remove')
})

test('an unknown key with no near match lists the allowed keys only', (t) => {
  t.is(refusal('app: foo/trunk\nnodes: 3\n').message, 'input.yaml:2: unknown key "nodes"; allowed: app, layers, classes, parameters, environment, remove')
})

test('a missing app is 65', (t) => {
  for (const text of ['classes:\n  - foo\n', 'app:\nclasses: [foo]\n', 'app: ~\n']) {
    const error = refusal(text)
    t.is(error.exitCode, 65)
    t.is(error.message, 'input.yaml: missing required key app (e.g. app: foo/tags/1.2.0)')
  }
})

test('an invalid app reference is 65, naming the line and the key', (t) => {
  const error = refusal('# node\nclasses: [foo]\napp: foo/tunk\n')
  t.true(error instanceof ReleaseError)
  t.is(error.exitCode, 65)
  t.is(error.message, 'input.yaml:3: app: "foo/tunk" is not a release reference')
  t.is(refusal('app: [foo/trunk]\n').message, 'input.yaml:1: app: expected a string such as foo/trunk, foo/tags/1.2.0 or foo@^1.2, got a list')
})

// --- classes ------------------------------------------------------------------------------------------

for (const name of ['Foo', 'foo-bar', 'class', '::foo', 'foo::', 'foo::Bar', '1foo', 'foo::define', 'main', '']) {
  test(`class name ${JSON.stringify(name)} is refused in the list form (65)`, (t) => {
    const error = refusal(`app: foo/trunk\nclasses:\n  - ok\n  - ${JSON.stringify(name)}\n`)
    t.is(error.exitCode, 65)
    t.is(error.message, `input.yaml:2: classes[1]: ${JSON.stringify(name)} is not a valid Puppet class name`)
  })
}

for (const name of ['Foo', 'foo-bar', 'class']) {
  test(`class name ${JSON.stringify(name)} is refused in the map form, naming its line (65)`, (t) => {
    const error = refusal(`app: foo/trunk\nclasses:\n  ok:\n  ${name}:\n    port: 1\n`)
    t.is(error.exitCode, 65)
    t.is(error.message, `input.yaml:4: classes: ${JSON.stringify(name)} is not a valid Puppet class name`)
  })
}

test('a class listed twice is refused', (t) => {
  t.is(refusal('app: foo/trunk\nclasses:\n  - foo\n  - foo\n').message, 'input.yaml:2: classes[1]: class foo is listed twice')
})

test('a class entry that is not a string is refused', (t) => {
  t.is(refusal('app: foo/trunk\nclasses:\n  - foo: 1\n').message, 'input.yaml:2: classes[0]: {"foo":1} is not a valid Puppet class name')
})

test('classes that are neither list nor mapping are refused', (t) => {
  t.is(
    refusal('app: foo/trunk\nclasses: foo\n').message,
    'input.yaml:2: classes must be a list of class names or a mapping of class name to parameters, got string "foo"',
  )
})

test('class parameters must be a mapping', (t) => {
  t.is(
    refusal('app: foo/trunk\nclasses:\n  foo:\n    - port\n').message,
    'input.yaml:3: classes.foo: expected a mapping of parameter to value or nothing, got a list',
  )
})

for (const param of ['Port', 'max-conns', '1port', '$port']) {
  test(`class parameter name ${JSON.stringify(param)} is refused, naming its line`, (t) => {
    const error = refusal(`app: foo/trunk\nclasses:\n  foo:\n    ok: 1\n    ${JSON.stringify(param)}: 2\n`)
    t.is(error.exitCode, 65)
    t.is(error.message, `input.yaml:5: classes.foo: ${JSON.stringify(param)} is not a valid class parameter name`)
  })
}

// --- parameters ---------------------------------------------------------------------------------------

for (const name of ['Datacenter', 'data-center', '9lives', 'a b']) {
  test(`top-scope parameter name ${JSON.stringify(name)} is refused, naming its line`, (t) => {
    const error = refusal(`app: foo/trunk\nparameters:\n  datacenter: ams1\n  ${JSON.stringify(name)}: x\n`)
    t.is(error.exitCode, 65)
    t.is(error.message, `input.yaml:4: parameters: ${JSON.stringify(name)} is not a valid Puppet variable name`)
  })
}

for (const name of PROVENANCE_PARAMETERS) {
  test(`parameter ${name} is reserved for localpuppet`, (t) => {
    const error = refusal(`app: foo/trunk\nparameters:\n  datacenter: ams1\n  ${name}: foo/tags/9.9.9\n`)
    t.is(error.exitCode, 65)
    t.is(error.message, `input.yaml:4: parameters.${name} is set by localpuppet itself and cannot be given in the input`)
  })
}

test('the provenance parameter names are exactly localpuppet_release and localpuppet_run_id', (t) => {
  t.deepEqual([...PROVENANCE_PARAMETERS], ['localpuppet_release', 'localpuppet_run_id'])
})

test('variables Puppet owns cannot be parameters', (t) => {
  t.is(refusal('app: foo/trunk\nparameters:\n  facts: {}\n').message, 'input.yaml:3: parameters.facts is a variable Puppet reserves for itself')
})

test('parameters that are not a mapping are refused', (t) => {
  t.is(refusal('app: foo/trunk\nparameters: [a, b]\n').message, 'input.yaml:2: parameters must be a mapping of name to value, got a list')
})

// --- environment --------------------------------------------------------------------------------------

for (const [yaml, shown] of [
  ['Production', '"Production"'],
  ['my-env', '"my-env"'],
  ['"a b"', '"a b"'],
] as const) {
  test(`environment ${yaml} is refused, naming its line`, (t) => {
    const error = refusal(`app: foo/trunk\nenvironment: ${yaml}\n`)
    t.is(error.exitCode, 65)
    t.is(error.message, `input.yaml:2: environment ${shown} is not a valid Puppet environment name (lowercase letters, digits, underscores)`)
  })
}

test('an environment that is not a string is refused as such, with the quoting that fixes it', (t) => {
  t.is(refusal('app: foo/trunk\nenvironment: 2024\n').message, "input.yaml:2: environment must be a string (quote it: environment: '2024')")
  t.is(refusal('app: foo/trunk\nenvironment: [production]\n').exitCode, 65)
})

// --- YAML itself --------------------------------------------------------------------------------------

test('a YAML syntax error is 65 and reports file:line:col', (t) => {
  const error = refusal('app: foo/trunk\n  bad: indent\n', '/etc/puppet/input.yaml')
  t.true(error instanceof InputError)
  t.is(error.exitCode, 65)
  t.is(error.message, '/etc/puppet/input.yaml:2:6: bad indentation of a mapping entry')
  t.is(refusal('app: foo/trunk\nclasses: [foo,\n').message, 'input.yaml:3:1: unexpected end of the stream within a flow collection')
  t.is(refusal('app: foo/trunk\napp: bar/trunk\n').message, 'input.yaml:2:1: duplicated mapping key')
})

test('a document that is not a mapping is 65, saying what it is', (t) => {
  t.is(refusal('- app: foo/trunk\n').message, 'input.yaml: expected a mapping with app, classes, parameters, environment, got a list')
  t.is(refusal('foo/trunk\n').message, 'input.yaml: expected a mapping with app, classes, parameters, environment, got string "foo/trunk"')
  t.is(refusal('42\n').message, 'input.yaml: expected a mapping with app, classes, parameters, environment, got number 42')
})

test('an empty document is 65', (t) => {
  for (const text of ['', '# nothing\n', '---\n']) {
    t.is(refusal(text).message, 'input.yaml: empty document; expected a mapping with app, classes, parameters, environment')
  }
})

test('an alias bomb is refused (65) instead of expanded', (t) => {
  const levels = ['a: &a ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]']
  for (const name of 'bcdefgh') {
    const prev = String.fromCharCode(name.charCodeAt(0) - 1)
    levels.push(`${name}: &${name} [${Array.from({length: 10}, () => `*${prev}`).join(', ')}]`)
  }

  const error = refusal(`${levels.join('\n')}\n`)
  t.is(error.exitCode, 65)
  t.is(error.message, 'input.yaml: too many values once aliases are expanded (over 200000)')
})

test('deep nesting is refused (65), not a stack overflow', (t) => {
  const error = refusal(`app: foo/trunk\nparameters:\n  x: ${'['.repeat(50_000)}\n`)
  t.is(error.exitCode, 65)
  t.regex(error.message, /^input\.yaml:3:\d+: /)
})

test('a __proto__ key is just an unknown key', (t) => {
  t.is(refusal('app: foo/trunk\n__proto__: {app: x}\n').message, 'input.yaml:2: unknown key "__proto__"; allowed: app, layers, classes, parameters, environment, remove')
})

// --- names on their own ----------------------------------------------------------------------------

test('Puppet name rules', (t) => {
  for (const name of ['foo', 'foo::bar_baz', 'a1::b2::c_3']) t.true(isValidClassName(name), name)
  for (const name of ['Foo', 'foo-bar', 'class', 'define', 'foo::class', '::foo', 'foo::', 'foo:bar', '_foo', 'x'.repeat(256)]) {
    t.false(isValidClassName(name), name)
  }

  for (const name of ['port', '_private', 'max_conns2', 'camelCase']) t.true(isValidParameterName(name), name)
  for (const name of ['Port', 'max-conns', '2x', '']) t.false(isValidParameterName(name), name)
  for (const name of ['production', 'staging_2', '2024']) t.true(isValidEnvironmentName(name), name)
  for (const name of ['Production', 'my-env', '', 'a.b']) t.false(isValidEnvironmentName(name), name)
})

// --- reading the file ------------------------------------------------------------------------------

test('readNodeInput reads a file and names it in messages', async (t) => {
  const dir = await tempDir(t)
  await writeTree(dir, {'good.yaml': 'app: foo/trunk\n', 'bad.yaml': 'app: foo/trunk\nextra: 1\n'})
  t.is((await readNodeInput(join(dir, 'good.yaml'))).source, join(dir, 'good.yaml'))
  const error = await t.throwsAsync(readNodeInput(join(dir, 'bad.yaml')), {instanceOf: InputError})
  t.is(error.message, `${join(dir, 'bad.yaml')}:2: unknown key "extra"; allowed: app, layers, classes, parameters, environment, remove`)
})

test('readNodeInput: a missing input file is 66, a directory is 65', async (t) => {
  const dir = await tempDir(t)
  const missing = join(dir, 'input.yaml')
  const notFound = await t.throwsAsync(readNodeInput(missing), {instanceOf: NotFoundError})
  t.is(notFound.exitCode, 66)
  t.is(notFound.message, `input file ${missing}: not found`)
  const isDir = await t.throwsAsync(readNodeInput(dir), {instanceOf: InputError})
  t.is(isDir.exitCode, 65)
  t.is(isDir.message, `input ${dir}: is a directory, expected a YAML file`)
})

test('readNodeInput reads - from stdin and calls it <stdin>', async (t) => {
  const input = await readNodeInput('-', Readable.from([Buffer.from('app: foo/'), Buffer.from('trunk\nenvironment: test\n')]))
  t.is(input.source, '<stdin>')
  t.is(input.environment, 'test')
  const error = await t.throwsAsync(readNodeInput('-', Readable.from(['app: foo/trunk\nclasses: [Foo]\n'])), {instanceOf: InputError})
  t.is(error.message, '<stdin>:2: classes[0]: "Foo" is not a valid Puppet class name')
})

// --- properties -----------------------------------------------------------------------------------

/** Text built from YAML's significant pieces, so the parser and validator are both reached. */
const yamlish = fc
  .array(
    fc.oneof(
      fc.constantFrom('app', 'classes', 'parameters', 'environment', 'foo/trunk', 'foo@^1', ': ', ':', '\n', '  ', '- ', '[', ']', '{', '}', ',', '&a ', '*a', '<<: ', '"', "'", '#', '!!str ', '!!binary ', '---\n', '...\n', '? ', '|\n', '>\n', '\t', 'Foo', 'foo::bar', 'localpuppet_run_id', '__proto__', 'constructor', '~', 'null', '1.5', '2024-01-01'),
      fc.string({maxLength: 4}),
    ),
    {maxLength: 40},
  )
  .map((parts) => parts.join(''))

test('property: parseNodeInput throws nothing but a LocalpuppetError on arbitrary text', (t) => {
  fc.assert(
    fc.property(fc.oneof(yamlish, fc.string({unit: 'binary', maxLength: 200})), (text) => {
      try {
        const input = parseNodeInput(text, 'input.yaml')
        return typeof input.app.app === 'string' && input.digest.startsWith('sha256:')
      } catch (error) {
        return error instanceof LocalpuppetError && error.exitCode === 65 && error.message.startsWith('input.yaml')
      }
    }),
    {numRuns: 5000},
  )
  t.pass()
})

test('property: any valid document survives a dump and parse unchanged', (t) => {
  const className = fc
    .array(fc.stringMatching(/^[a-z][a-z0-9_]{0,8}$/).filter((segment) => isValidClassName(segment)), {minLength: 1, maxLength: 3})
    .map((segments) => segments.join('::'))
  const paramName = fc.stringMatching(/^[a-z_][A-Za-z0-9_]{0,10}$/).filter((name) => !['trusted', 'facts', 'server_facts', 'localpuppet_release', 'localpuppet_run_id', '__proto__'].includes(name))
  const value = fc.jsonValue({maxDepth: 3}).filter((v) => !JSON.stringify(v)?.includes('__proto__'))
  const doc = fc.record(
    {
      app: fc.constantFrom('foo/trunk', 'foo/tags/1.4.0', 'app/foo/branches/x', 'foo@^1.2', 'foo@r1'),
      classes: fc.oneof(
        fc.uniqueArray(className, {maxLength: 4}),
        fc.dictionary(className, fc.option(fc.dictionary(paramName, value, {maxKeys: 3})), {maxKeys: 3}),
      ),
      parameters: fc.dictionary(paramName, value, {maxKeys: 4}),
      environment: fc.stringMatching(/^[a-z0-9_]{1,12}$/),
    },
    {requiredKeys: ['app']},
  )
  fc.assert(
    fc.property(doc, (document) => {
      const input = parseNodeInput(dumpYaml(document), 'input.yaml')
      t.deepEqual(input.raw, exactIntegers(document))
    }),
    {numRuns: 300},
  )
})

test('an input may name layers and removals (issue 36); a bad layer name is refused at its line', (t) => {
  const input = parseNodeInput('app: foo/trunk\nlayers: [site/dc1, role/web]\nremove: [classes.motd]\n', 'input.yaml')
  t.deepEqual([input.layers, input.remove], [['site/dc1', 'role/web'], ['classes.motd']])
  t.is(refusal('app: foo/trunk\nlayers:\n  - ../../etc/shadow\n').message, 'input.yaml:2: layers[0]: "../../etc/shadow" is not a layer name (path-like: site/dc1, role/web)')
  t.is(refusal('app: foo/trunk\nlayers: site/dc1\n').message, 'input.yaml:2: layers must be a list, got string "site/dc1"')
})
