import {type ChildProcessWithoutNullStreams, execFile, spawn, spawnSync} from 'node:child_process'
import {chmod, mkdir, mkdtemp, readdir, writeFile} from 'node:fs/promises'
import {join} from 'node:path'
import {createInterface} from 'node:readline'
import {promisify} from 'node:util'
import {deepStrictEqual, equal, ok} from 'node:assert/strict'

import test, {type ExecutionContext} from 'ava'
import fc from 'fast-check'
import yaml from 'js-yaml'

import {type EncDocument, buildEncDocument, renderEncYaml} from '../../../src/lib/enc/enc-document.js'
import {renderEncScript} from '../../../src/lib/enc/exec-enc.js'
import {shellQuote} from '../../../src/lib/util/shell-quote.js'
import {type NodeInput, parseNodeInput} from '../../../src/lib/input/node-input.js'
import {isValidClassName} from '../../../src/lib/input/puppet-names.js'
import {newRunId} from '../../../src/lib/state/run-id.js'
import {dumpYaml, parseYaml} from '../../../src/lib/yaml.js'
import {exactIntegers} from '../../helpers/exact.js'
import {tempDir} from '../../helpers/temp.js'

const execFileP = promisify(execFile)

// ---------------------------------------------------------------------------------------
// Arbitrary input documents: everything YAML can hold, with the strings that break shells,
// heredocs and YAML emitters over-represented.

const NASTY = [
  "'", '"', "'\\''", '$(id)', '`id`', '$(touch pwned)', '`touch pwned`', "'; touch pwned; '", '${HOME}', '$HOME', '\\', '\\n', '\n', '\r\n', '\r', '\t', ' ', '',
  'EOF', '---', '...', '#', '# x', ': ', '- ', '? ', '|', '>', '&a', '*a', '!!binary', '!ruby/object:Foo', '%YAML 1.1',
  '<<', '~', 'null', 'NuLl', 'yes', 'No', 'on', 'y', 'true', '2024-01-01', '2024-1-1', '2001-12-14 21:59:43.10 -5',
  '12:30', '1_000', '1,000', '0x1F', '0o17', '017', '1e3', '.inf', '-.nan', ':sym', '@', '=', '{}', '[]', '{a: 1}',
  'é', '漢字', '😀', 'e\u0301', '\u2028', '\u2029', '\u0085', '\ufeff', '\u0000', '\u0007', '\u001b[31m', '\u007f', '\u00a0',
]
const piece = fc.oneof(fc.constantFrom(...NASTY), fc.string({unit: 'binary', maxLength: 12}), fc.string({maxLength: 12}))
const line = fc.oneof(piece, fc.array(piece, {maxLength: 4}).map((parts) => parts.join('')))
/** Single- and multi-line strings, so that some lines equal `EOF`, `---` or `...` exactly. */
const text = fc.oneof(line, fc.array(line, {minLength: 2, maxLength: 5}).map((lines) => lines.join('\n')))
const number = fc.oneof(fc.integer(), fc.double(), fc.maxSafeInteger(), fc.constantFrom(0, -0, 2 ** 53 + 2, 2 ** 63, 1e21, -1e22, 1.5e300, 5e-324))
const scalar = fc.oneof(text, number, fc.boolean(), fc.constant(null))

/** Plain objects built with Object.fromEntries, so a `__proto__` key is an own key like any other. */
function mapOf<V>(key: fc.Arbitrary<string>, value: fc.Arbitrary<V>, maxLength = 4): fc.Arbitrary<Record<string, V>> {
  return fc.uniqueArray(fc.tuple(key, value), {selector: ([k]) => k, maxLength}).map((entries) => Object.fromEntries(entries))
}

const anyKey = fc.oneof(text, fc.constantFrom('__proto__', 'constructor', 'toString', '0', '1.5', '-1'))
const value: fc.Arbitrary<unknown> = fc.letrec<{value: unknown; list: unknown[]; map: Record<string, unknown>}>((tie) => ({
  value: fc.oneof({depthSize: 'small', withCrossShrink: true}, scalar, tie('list'), tie('map')),
  list: fc.array(tie('value'), {maxLength: 4}),
  map: mapOf(anyKey, tie('value')),
})).value

const RESERVED = new Set(['trusted', 'facts', 'server_facts', 'localpuppet_release', 'localpuppet_run_id'])
const parameterName = fc
  .oneof(fc.stringMatching(/^[a-z_][A-Za-z0-9_]{0,15}$/), fc.constantFrom('__proto__', 'constructor', 'yes', 'null', 'true', 'on', 'y', '_'))
  .filter((name) => !RESERVED.has(name))
const className = fc.stringMatching(/^[a-z][a-z0-9_]{0,8}(::[a-z][a-z0-9_]{0,8}){0,2}$/).filter((name) => isValidClassName(name))
const classes = fc.oneof(
  fc.uniqueArray(className, {maxLength: 4}),
  mapOf(className, fc.option(mapOf(parameterName, value), {nil: null})),
)

interface GeneratedInput {
  app: string
  classes?: string[] | Record<string, Record<string, unknown> | null>
  parameters?: Record<string, unknown>
  environment?: string
}

const inputDocument: fc.Arbitrary<GeneratedInput> = fc.record(
  {
    app: fc.constantFrom('foo/tags/1.4.0', 'foo/trunk', 'app/foo/branches/feature-x', 'foo@^1.2', 'my-app@r1'),
    classes,
    parameters: mapOf(parameterName, value, 6),
    environment: fc.oneof(fc.constant('production'), fc.stringMatching(/^[a-z0-9_]{1,12}$/)),
  },
  {requiredKeys: ['app']},
)

const RELEASE = 'foo/tags/1.4.0'

/** What the ENC must print, built independently of buildEncDocument. */
function expectedDocument(generated: GeneratedInput, runId: string): Record<string, unknown> {
  return {
    ...(generated.classes === undefined ? {} : {classes: generated.classes}),
    parameters: {...generated.parameters, localpuppet_release: RELEASE, localpuppet_run_id: runId},
    ...(generated.environment === undefined ? {} : {environment: generated.environment}),
  }
}

/** input.yaml text → NodeInput → ENC document and its YAML, checking each step. */
function encFor(generated: GeneratedInput, runId: string): {doc: EncDocument; encYaml: string; expected: Record<string, unknown>} {
  const input: NodeInput = parseNodeInput(dumpYaml(generated), 'input.yaml')
  deepStrictEqual(input.parameters, exactIntegers(generated.parameters))
  const doc = buildEncDocument(input, {release: RELEASE, runId})
  const expected = exactIntegers(expectedDocument(generated, runId))
  deepStrictEqual(doc, expected)
  return {doc, encYaml: renderEncYaml(doc), expected}
}

/** A directory whose path a shell would mangle: a quote, spaces, `$`, a backtick. */
async function hostileDir(t: ExecutionContext): Promise<string> {
  return tempDir(t, "localpuppet-test-it's a $HOME `x` dir-")
}

/** Writes enc.yaml and the script as apply does, then runs the script the way Puppet does: no shell, certname as argument. */
async function runEnc(dir: string, encYaml: string | undefined, runId: string): Promise<Buffer> {
  const encYamlPath = join(dir, 'enc.yaml')
  const script = join(dir, 'enc')
  if (encYaml !== undefined) await writeFile(encYamlPath, encYaml, {mode: 0o600})
  await writeFile(script, renderEncScript(encYamlPath, runId), {mode: 0o700})
  await chmod(script, 0o700)
  // cwd is the run directory: a `touch pwned` that ran would leave its file there.
  const {stdout} = await execFileP(script, ['web01.example.com'], {encoding: 'buffer', cwd: dir, env: {PATH: process.env.PATH}})
  return stdout
}

test('the ENC script prints any input document byte for byte, from a directory a shell would mangle', async (t) => {
  const base = await hostileDir(t)
  t.true(base.includes("'") && base.includes(' ') && base.includes('$'))
  await fc.assert(
    fc.asyncProperty(inputDocument, async (generated) => {
      const runId = newRunId()
      const {encYaml, expected} = encFor(generated, runId)
      const dir = await mkdtemp(join(base, "run '$(touch pwned)' "))
      const stdout = await runEnc(dir, encYaml, runId)
      deepStrictEqual((await readdir(dir)).sort(), ['enc', 'enc.yaml'])
      ok(stdout.equals(Buffer.from(encYaml, 'utf8')), `stdout differs from enc.yaml:\n${JSON.stringify(stdout.toString())}\n${JSON.stringify(encYaml)}`)
      deepStrictEqual(exactIntegers(yaml.load(stdout.toString('utf8'))), expected)
      deepStrictEqual(parseYaml(stdout.toString('utf8'), 'enc output'), expected)
    }),
    {numRuns: 60},
  )
})

test('the ENC script prints the document whatever the name of its directory', async (t) => {
  const base = await hostileDir(t)
  const segment = fc.string({unit: 'binary', minLength: 1, maxLength: 20}).filter((name) => !/[/\0]/.test(name) && name !== '.' && name !== '..' && Buffer.byteLength(name) < 200)
  const encYaml = renderEncYaml({classes: ['foo'], parameters: {weird: "it's $(id) `id`\nEOF\n"}})
  await fc.assert(
    fc.asyncProperty(segment, async (name) => {
      const dir = join(await mkdtemp(join(base, 'run-')), name)
      await mkdir(dir)
      equal((await runEnc(dir, encYaml, newRunId())).toString('utf8'), encYaml)
    }),
    {numRuns: 40},
  )
  t.pass()
})

test('the ENC script is a /bin/sh script that cats the file beside it and nothing else', async (t) => {
  const dir = await hostileDir(t)
  const runId = '20261122T091631.123Z-4f2a'
  const path = join(dir, 'enc.yaml')
  const script = renderEncScript(path, runId)
  const lines = script.split('\n')
  t.is(lines[0], '#!/bin/sh')
  t.true(lines[1].startsWith('#') && lines[1].includes(runId))
  t.is(lines[2], `exec cat -- ${shellQuote(path)}`)
  t.deepEqual(lines.slice(3), [''])
})

test('a missing ENC file makes the script fail rather than print an empty document', async (t) => {
  const dir = await hostileDir(t)
  const error = await t.throwsAsync(runEnc(dir, undefined, newRunId()))
  t.not((error as unknown as {code: number}).code, 0)
})

test('the script ignores the certname Puppet appends and reads no stdin', async (t) => {
  const dir = await hostileDir(t)
  const encYaml = renderEncYaml({parameters: {a: 1}})
  await runEnc(dir, encYaml, newRunId())
  const {stdout} = await execFileP(join(dir, 'enc'), ['$(id)', '--help', '-n'], {encoding: 'utf8'})
  t.is(stdout, encYaml)
})

test('shellQuote leaves safe words alone and single-quotes the rest', (t) => {
  t.is(shellQuote('/var/lib/localpuppet/runs/20261122T091631.123Z-4f2a/enc.yaml'), '/var/lib/localpuppet/runs/20261122T091631.123Z-4f2a/enc.yaml')
  t.is(shellQuote('a=b,c:d@e%f+g'), 'a=b,c:d@e%f+g')
  t.is(shellQuote(''), "''")
  t.is(shellQuote('a b'), "'a b'")
  t.is(shellQuote("it's"), "'it'\\''s'")
  t.is(shellQuote('$(id)'), "'$(id)'")
  t.is(shellQuote('`id`'), "'`id`'")
  t.is(shellQuote('*'), "'*'")
  t.is(shellQuote('~root'), "'~root'")
  t.is(shellQuote('-n'), '-n')
})

test('shellQuote gives /bin/sh back the exact word, whatever it holds', async (t) => {
  const word = fc.oneof(
    fc.string({unit: 'binary', maxLength: 30}),
    fc.array(fc.constantFrom(...NASTY), {maxLength: 6}).map((parts) => parts.join('')),
  ).filter((w) => !w.includes('\0'))
  await fc.assert(
    fc.asyncProperty(word, async (w) => {
      const {stdout} = await execFileP('/bin/sh', ['-c', `printf '%s' ${shellQuote(w)}`], {encoding: 'utf8'})
      equal(stdout, w)
    }),
    {numRuns: 100},
  )
  t.pass()
})

const INPUT = [
  'app: foo/tags/1.4.0',
  'environment: staging',
  'parameters:',
  '  datacenter: ams1',
  'classes:',
  '  foo:',
  '    port: 8080',
  '  platform:',
  '',
].join('\n')

test('the ENC document holds classes, parameters and environment, in that order, never app', (t) => {
  const input = parseNodeInput(INPUT, 'input.yaml')
  const doc = buildEncDocument(input, {release: 'foo/tags/1.4.0', runId: '20261122T091631.123Z-4f2a'})
  t.deepEqual(Object.keys(doc), ['classes', 'parameters', 'environment'])
  t.deepEqual(doc, {
    classes: {foo: {port: 8080}, platform: null},
    parameters: {datacenter: 'ams1', localpuppet_release: 'foo/tags/1.4.0', localpuppet_run_id: '20261122T091631.123Z-4f2a'},
    environment: 'staging',
  })
  t.false('app' in doc)
  const encYaml = renderEncYaml(doc)
  t.is(
    encYaml,
    [
      'classes:',
      '  foo:',
      '    port: 8080',
      '  platform: null',
      'parameters:',
      '  datacenter: ams1',
      '  localpuppet_release: foo/tags/1.4.0',
      '  localpuppet_run_id: 20261122T091631.123Z-4f2a',
      'environment: staging',
      '',
    ].join('\n'),
  )
})

test('without classes, parameters or environment the document still carries the provenance parameters', (t) => {
  const input = parseNodeInput('app: foo/trunk\n', 'input.yaml')
  const doc = buildEncDocument(input, {release: 'foo/trunk', runId: '20261122T091631.123Z-4f2a'})
  t.deepEqual(Object.keys(doc), ['parameters'])
  t.deepEqual(doc.parameters, {localpuppet_release: 'foo/trunk', localpuppet_run_id: '20261122T091631.123Z-4f2a'})
  t.false(/^app:/m.test(renderEncYaml(doc)))
})

test('the provenance parameters come last and the key order holds for any input', (t) => {
  fc.assert(
    fc.property(inputDocument, (generated) => {
      const {doc, encYaml} = encFor(generated, '20261122T091631.123Z-4f2a')
      const keys = Object.keys(doc)
      deepStrictEqual(keys, ['classes', 'parameters', 'environment'].filter((key) => key in doc))
      deepStrictEqual(Object.keys(doc.parameters).slice(-2), ['localpuppet_release', 'localpuppet_run_id'])
      const topLevel = encYaml.split('\n').filter((l) => /^\S/.test(l) && !l.startsWith('- '))
      deepStrictEqual(
        topLevel.map((l) => l.split(':')[0]),
        keys,
      )
    }),
    {numRuns: 200},
  )
  t.pass()
})

// ---------------------------------------------------------------------------------------
// What Puppet itself reads: Puppet::Node::Exec loads the ENC output with
// YAML.safe_load(output, permitted_classes: [Symbol], aliases: true). Ruby's Psych is a
// YAML 1.1 loader, so this is where a YAML 1.2 emitter's quoting can go wrong.

function findRuby(): string | undefined {
  for (const ruby of ['ruby', '/opt/puppetlabs/puppet/bin/ruby']) {
    const probe = spawnSync(ruby, ['-ryaml', '-rjson', '-e', 'exit 0'], {stdio: 'ignore'})
    if (probe.status === 0) return ruby
  }

  return undefined
}

const RUBY = findRuby()

// Typed, so an Integer, a Float, a String and a Symbol never look alike once in JSON.
const PSYCH_SCRIPT = `
$stdout.sync = true
def enc(v)
  case v
  when Hash then {'map' => v.map { |k, x| [enc(k), enc(x)] }}
  when Array then {'seq' => v.map { |x| enc(x) }}
  when String then {'str' => v}
  when Integer then {'int' => v.to_s}
  when Float then {'float' => v.nan? ? 'NaN' : v.infinite? ? (v > 0 ? 'Infinity' : '-Infinity') : v}
  when true, false, nil then v
  else {'other' => "#{v.class}: #{v.inspect}"}
  end
end
$stdin.each_line do |line|
  out = begin
    {'ok' => enc(YAML.safe_load(JSON.parse(line), permitted_classes: [Symbol], aliases: true))}
  rescue Exception => e
    {'error' => "#{e.class}: #{e.message}"}
  end
  puts JSON.generate(out)
end
`

function typed(v: unknown): unknown {
  if (v === null || typeof v === 'boolean') return v
  if (typeof v === 'string') return {str: v}
  if (typeof v === 'bigint') return {int: v.toString()}
  if (typeof v === 'number') {
    if (Number.isNaN(v)) return {float: 'NaN'}
    if (!Number.isFinite(v)) return {float: v > 0 ? 'Infinity' : '-Infinity'}
    return Number.isInteger(v) && !Object.is(v, -0) && Math.abs(v) < 1e21 ? {int: String(v)} : {float: v}
  }

  if (Array.isArray(v)) return {seq: v.map((x) => typed(x))}
  return {map: Object.entries(v as object).map(([k, x]) => [typed(k), typed(x)])}
}

/** One Ruby process for the whole property: YAML text in, Psych's typed reading out. */
function psychLoader(t: ExecutionContext, ruby: string): (text: string) => Promise<unknown> {
  const child: ChildProcessWithoutNullStreams = spawn(ruby, ['-ryaml', '-rjson', '-e', PSYCH_SCRIPT])
  const replies = createInterface({input: child.stdout})[Symbol.asyncIterator]()
  t.teardown(() => {
    child.stdin.end()
  })
  return async (text) => {
    child.stdin.write(JSON.stringify(text) + '\n')
    const reply = await replies.next()
    if (reply.done) throw new Error('ruby exited')
    return JSON.parse(reply.value)
  }
}

const psychTest = RUBY ? test : test.skip

psychTest("Puppet's YAML loader (Psych) reads the ENC document as the same strings, numbers, booleans and nulls", async (t) => {
  const load = psychLoader(t, RUBY!)
  t.deepEqual(await load('a: 1_000\n'), {ok: {map: [[{str: 'a'}, {int: '1000'}]]}}, 'the Psych check itself works')
  await fc.assert(
    fc.asyncProperty(inputDocument, async (generated) => {
      const {encYaml, expected} = encFor(generated, newRunId())
      deepStrictEqual(await load(encYaml), {ok: typed(expected)})
    }),
    {numRuns: 400},
  )
})

psychTest('Psych reads lookalike strings, big numbers and a "<<" key in an ENC document as they are', async (t) => {
  const load = psychLoader(t, RUBY!)
  const parameters: Record<string, unknown> = {}
  NASTY.forEach((s, i) => {
    parameters[`s${i}`] = s
  })
  Object.assign(parameters, {big: 1e21, huge: -1.5e300, tiny: 5e-324, negzero: -0, nested: {'<<': {a: 1}, yEs: 'NuLl', '1_000': '2024-1-1'}})
  const doc = {classes: ['foo'], parameters}
  t.deepEqual(await load(renderEncYaml(doc)), {ok: typed(doc)})
})
