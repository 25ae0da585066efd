import {cp, stat, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import Ajv2020 from 'ajv/dist/2020.js'
import test from 'ava'
import {XMLParser} from 'fast-xml-parser'

import {FIXTURES, REPO, cli, isolatePuppet} from '../helpers/cli.js'
import {installEdited} from '../helpers/repository.js'
import {assignmentsClass, oneLineClasses} from '../helpers/puppet-code.js'
import {type Tree, tempDir, writeTree} from '../helpers/temp.js'

const CI = join(FIXTURES, 'ci')
const inputs = (name: string) => join(CI, 'inputs', name)

/** Every problem the fixture repository holds: input file, check, and the exact message. */
const EXPECTED: Record<string, Array<[string, string]>> = {
  'bad-parameter.yaml': [['parameters', `${inputs('bad-parameter.yaml')}:5: class web has no parameter prot (did you mean port?); it declares port, docroot, admin (web/tags/1.0.0/web/manifests/init.pp:2)`]],
  'bad-yaml.yaml': [['input', `${inputs('bad-yaml.yaml')}:5:2: bad indentation of a mapping entry`]],
  'define-as-class.yaml': [['classes', `${inputs('define-as-class.yaml')}:3: web::vhost is a defined type, not a class`]],
  'escape.yaml': [['release', `${inputs('escape.yaml')}:2: release escape/tags/1.0.0: resolves to ${join(CI, 'outside/escape')}, outside the module directory ${join(CI, 'modules')}`]],
  'good.yaml': [],
  'missing-class.yaml': [['classes', `${inputs('missing-class.yaml')}:4: class wbe is not defined on the modulepath (Puppet looks in wbe/manifests/init.pp); did you mean web?`]],
  'missing-release.yaml': [['release', `${inputs('missing-release.yaml')}:2: release web/tags/9.9.9: web/tags/9.9.9 not found in ${join(CI, 'modules')}`]],
  'mutable.yaml': [['release', `${inputs('mutable.yaml')}: mutable/tags/1.0.0/manifest.yaml:2: modulepath[0]: "base/trunk" is mutable (trunk); a tagged release may depend only on exact tags such as base/tags/1.0.0`]],
  'no-match.yaml': [['release', `${inputs('no-match.yaml')}:2: release web@^7: no tag of web satisfies "^7"; tags: 1.0.0`]],
  'syntax-error.yaml': [['syntax', "broken/tags/1.0.0/broken/manifests/init.pp:5:5: Syntax error at 'mode'"]],
  'unknown-key.yaml': [['input', `${inputs('unknown-key.yaml')}:3: unknown key "clases" (did you mean classes?); allowed: app, layers, classes, parameters, environment, remove`]],
}

test('validate finds one of every problem in one pass, each with its file and line', async (t) => {
  const dir = await tempDir(t)
  const result = await cli(['validate', join(CI, 'inputs'), '--module-dir', join(CI, 'modules'), '--format', 'json', '--', ...isolatePuppet(dir)])
  t.is(result.exitCode, 65, result.stderr)
  const report = JSON.parse(result.stdout)
  const byFile = Object.fromEntries(report.inputs.map((input: {file: string; problems: Array<{check: string; message: string}>}) => [input.file.split('/').pop(), input.problems.map((p) => [p.check, p.message])]))
  t.deepEqual(byFile, EXPECTED)
  const syntax = report.inputs.find((input: {file: string}) => input.file.endsWith('syntax-error.yaml')).problems[0]
  t.deepEqual([syntax.file, syntax.line, syntax.column], ['broken/tags/1.0.0/broken/manifests/init.pp', 5, 5])
  const param = report.inputs.find((input: {file: string}) => input.file.endsWith('bad-parameter.yaml')).problems[0]
  t.deepEqual([param.file, param.line], [inputs('bad-parameter.yaml'), 5])
  t.is(report.problems, 10)
})

test('a clean input exits 0 and writes nothing', async (t) => {
  const dir = await tempDir(t)
  const result = await cli(['validate', inputs('good.yaml'), '--module-dir', join(CI, 'modules'), '--', ...isolatePuppet(dir)])
  t.is(result.exitCode, 0, result.stdout)
  t.regex(result.stdout, /^ok {4}.*good\.yaml \(web\/tags\/1\.0\.0\)$/m)
})

test('with no INPUT, validate checks the input setting, as apply and plan do: LOCALPUPPET_INPUT, else the configuration file', async (t) => {
  const dir = await tempDir(t)
  const config = join(dir, 'config.yaml')
  await writeFile(config, `input: ${inputs('good.yaml')}\nmodule_dir: ${join(CI, 'modules')}\n`, {mode: 0o644})
  const fromConfig = await cli(['validate', '--puppet', 'none'], {env: {LOCALPUPPET_CONFIG: config, LOCALPUPPET_INPUT: undefined}})
  t.is(fromConfig.exitCode, 0, fromConfig.stderr)
  t.regex(fromConfig.stdout, /^ok {4}.*good\.yaml \(web\/tags\/1\.0\.0\)$/m)
  const fromEnv = await cli(['validate', '--puppet', 'none', '--format', 'json'], {env: {LOCALPUPPET_CONFIG: config, LOCALPUPPET_INPUT: inputs('unknown-key.yaml')}})
  t.is(fromEnv.exitCode, 65, fromEnv.stderr)
  t.deepEqual(JSON.parse(fromEnv.stdout).inputs.map((input: {file: string}) => input.file), [inputs('unknown-key.yaml')])
})

test('--format junit: one testsuite per input, one testcase per check, failures inline', async (t) => {
  const dir = await tempDir(t)
  const result = await cli(['validate', join(CI, 'inputs'), '--module-dir', join(CI, 'modules'), '--format', 'junit', '--', ...isolatePuppet(dir)])
  t.is(result.exitCode, 65)
  const xml = new XMLParser({ignoreAttributes: false, attributeNamePrefix: '', isArray: (name) => ['testsuite', 'testcase', 'failure'].includes(name)}).parse(result.stdout)
  const suites = xml.testsuites.testsuite as Array<{name: string; tests: string; failures: string; testcase: Array<{name: string; file?: string; line?: string; failure?: Array<{message: string; type: string}>}>}>
  t.is(suites.length, Object.keys(EXPECTED).length)
  t.is(xml.testsuites.failures, '10')
  for (const suite of suites) {
    const expected = EXPECTED[suite.name.split('/').pop()!]
    t.deepEqual(suite.testcase.map((c) => c.name), ['input', 'release', 'classes', 'parameters', 'syntax', 'variables', 'metadata', 'requirements'])
    t.is(suite.failures, String(expected.length))
    const failures = suite.testcase.flatMap((c) => (c.failure ?? []).map((f) => [c.name, f.message]))
    t.deepEqual(failures, expected)
  }

  const param = suites.find((s) => s.name.endsWith('bad-parameter.yaml'))!.testcase.find((c) => c.name === 'parameters')!
  t.is(param.line, '5')
})

test('validate reports an installed tag that no longer verifies', async (t) => {
  const dir = await tempDir(t)
  const modules = join(dir, 'modules')
  await installEdited(dir, join(CI, 'modules'), 'web/tags/1.0.0', modules, 'web/manifests/init.pp')
  const result = await cli(['validate', inputs('good.yaml'), '--module-dir', modules, '--puppet', 'none', '--format', 'json'])
  t.is(result.exitCode, 65)
  t.deepEqual(JSON.parse(result.stdout).inputs[0].problems.map((p: {check: string; message: string}) => [p.check, p.message]), [
    ['release', `${inputs('good.yaml')}:2: web/tags/1.0.0/web/manifests/init.pp: modified since install`],
  ])
})

test('classes lists classes and defined types with parameters, defaults and files', async (t) => {
  const result = await cli(['classes', 'web/tags/1.0.0', '--module-dir', join(CI, 'modules'), '--json'])
  t.is(result.exitCode, 0, result.stderr)
  const {definitions} = JSON.parse(result.stdout)
  t.deepEqual(
    definitions.map((d: {kind: string; name: string; release: string; file: string; line: number}) => [d.kind, d.name, `${d.release}/${d.file}:${d.line}`]),
    [
      ['class', 'base', 'base/tags/1.0.0/base/manifests/init.pp:1'],
      ['class', 'web', 'web/tags/1.0.0/web/manifests/init.pp:2'],
      ['class', 'web::ssl::certs', 'web/tags/1.0.0/web/manifests/ssl/certs.pp:1'],
      ['define', 'web::vhost', 'web/tags/1.0.0/web/manifests/vhost.pp:2'],
    ],
  )
  t.deepEqual(definitions[1].parameters, [
    {name: 'port', type: 'Integer', default: '80', source: 'code', data: null, nodeDependent: []},
    {name: 'docroot', type: 'String', default: "'/srv/www'", source: 'code', data: null, nodeDependent: []},
    {name: 'admin', type: 'Optional[String]', default: 'undef', source: 'code', data: null, nodeDependent: []},
  ])
  const human = await cli(['classes', 'web/tags/1.0.0', '--module-dir', join(CI, 'modules')])
  t.regex(human.stdout, /define web::vhost {2}web\/tags\/1\.0\.0\/web\/manifests\/vhost\.pp:2\n {4}String \$server_name {2}\(required\)/)
})

test('plan --json matches the documented JSON Schema, which refuses anything undocumented', async (t) => {
  const schema = JSON.parse(await (await import('node:fs/promises')).readFile(join(REPO, 'integrations/schema/plan.schema.json'), 'utf8'))
  const ajv = new Ajv2020.default({allErrors: true, strict: true})
  const validate = ajv.compile(schema)
  const dir = await tempDir(t)
  for (const extra of [[], ['--fact', 'lifecycle_stage=bootstrap', '--noop', '--timeout', '60', '--manifest', join(dir, 'site.pp'), '--', '--debug']]) {
    await (await import('node:fs/promises')).writeFile(join(dir, 'site.pp'), '')
    const result = await cli(['plan', join(FIXTURES, 'demo/input.yaml'), '--module-dir', join(FIXTURES, 'demo/modules'), '--state-dir', join(dir, 'state'), '--json', ...extra])
    t.is(result.exitCode, 0, result.stderr)
    const plan = JSON.parse(result.stdout)
    t.true(validate(plan), JSON.stringify(validate.errors))
    t.false(validate({...plan, surprise: 1}), 'an undocumented field fails the schema')
  }
})

test('a directory copied elsewhere validates the same (no paths baked in)', async (t) => {
  const dir = await tempDir(t)
  await cp(join(CI, 'inputs', 'good.yaml'), join(dir, 'good.yaml'))
  const result = await cli(['validate', dir, '--module-dir', join(CI, 'modules'), '--puppet', 'none'])
  t.is(result.exitCode, 0, result.stdout)
})

/** Three tags of one app carrying the same module (a class and a defined type); 1.2.0 has a syntax error. */
async function twoTagsOfOneApp(dir: string): Promise<{modules: string; nodes: string}> {
  const tree: Tree = {}
  for (const tag of ['1.0.0', '1.1.0', '1.2.0']) {
    tree[`modules/site/tags/${tag}/web/manifests/init.pp`] = tag === '1.2.0' ? 'class web(Integer $port = 80) {\n  web::vhost { "x": port => $port\n}\n' : 'class web(Integer $port = 80) {\n  web::vhost { "x": port => $port }\n}\n'
    tree[`modules/site/tags/${tag}/web/manifests/vhost.pp`] = 'define web::vhost(Integer $port) {\n  notify { "${title}:${port}": }\n}\n'
  }

  tree['facts.json'] = '{"os": {"family": "Debian"}}\n'
  for (const [node, tag] of [['a', '1.0.0'], ['b', '1.1.0'], ['c', '1.2.0']]) tree[`nodes/${node}.yaml`] = `app: site/tags/${tag}\nclasses:\n  web:\n`
  await writeTree(dir, tree)
  return {modules: join(dir, 'modules'), nodes: join(dir, 'nodes')}
}

const junitSuites = (stdout: string) =>
  new XMLParser({ignoreAttributes: false, attributeNamePrefix: '', isArray: (name) => ['testsuite', 'testcase', 'failure'].includes(name)}).parse(stdout).testsuites

test('two tags of one app with the same module: each input is checked and reported on its own (text, JUnit, --compile)', async (t) => {
  const dir = await tempDir(t)
  const {modules, nodes} = await twoTagsOfOneApp(dir)
  const result = await cli(['validate', nodes, '--module-dir', modules, '--format', 'json', '--', ...isolatePuppet(dir)])
  t.is(result.exitCode, 65, result.stderr)
  const report = JSON.parse(result.stdout)
  t.deepEqual(
    report.inputs.map((input: {file: string; release: string; problems: Array<{check: string; file: string; line: number}>}) => [input.file.split('/').pop(), input.release, input.problems.map((p) => [p.check, p.file, p.line])]),
    [
      ['a.yaml', 'site/tags/1.0.0', []],
      ['b.yaml', 'site/tags/1.1.0', []],
      ['c.yaml', 'site/tags/1.2.0', [['syntax', 'site/tags/1.2.0/web/manifests/init.pp', 3]]],
    ],
  )
  t.is(report.puppetUnavailable, null)

  const compiled = await cli(['validate', nodes, '--module-dir', modules, '--compile', '--facts', join(dir, 'facts.json'), '--format', 'junit', '--', ...isolatePuppet(dir)])
  t.is(compiled.exitCode, 65, compiled.stderr)
  const suites = junitSuites(compiled.stdout).testsuite as Array<{name: string; testcase: Array<{name: string; failure?: unknown[]; skipped?: unknown}>}>
  t.deepEqual(suites.map((suite) => [suite.name.split('/').pop(), suite.testcase.filter((c) => c.failure).map((c) => c.name)]), [['a.yaml', []], ['b.yaml', []], ['c.yaml', ['syntax', 'compile']]])
  for (const suite of suites.slice(0, 2)) t.is(suite.testcase.find((c) => c.name === 'compile')!.skipped, undefined, `${suite.name} was compiled`)
})

test('Puppet that cannot be run: 69, and every input is still reported (JUnit written, syntax an error)', async (t) => {
  const dir = await tempDir(t)
  const {modules, nodes} = await twoTagsOfOneApp(dir)
  const ruby = join(dir, 'bin', 'ruby')
  const puppet = join(dir, 'bin', 'puppet')
  await writeTree(dir, {'bin/ruby': {mode: 0o755, content: '#!/bin/sh\necho "Error: cannot load such file -- puppet" >&2\nexit 1\n'}, 'bin/puppet': {mode: 0o755, content: `#!${ruby}\n`}})
  const result = await cli(['validate', nodes, '--module-dir', modules, '--puppet', puppet, '--format', 'junit'])
  t.is(result.exitCode, 69, result.stderr)
  const xml = junitSuites(result.stdout)
  t.is(xml.testsuite.length, 3)
  t.is(xml.errors, '3')
  t.regex(result.stderr, /^localpuppet: could not load Puppet with .*bin\/ruby \(the interpreter of .*bin\/puppet\): Error: cannot load such file -- puppet$/m)
})

// Puppet raises more than ParseError on a file: a Puppet::Error for bytes that are not UTF-8
// (a Latin-1 comment in an old module), SystemStackError for nesting deeper than its
// parser's stack. Either ended the one Ruby process, and every file after it was reported
// as "Puppet stopped before checking this file", the clean ones too, with no reason given.
test('a manifest Puppet cannot read (not UTF-8, nested too deeply) is that file\'s problem, named; the files after it are still checked, and nothing in them runs', async (t) => {
  const dir = await tempDir(t)
  const modules = join(dir, 'modules')
  const manifests = join(modules, 'ev/trunk/ev/manifests')
  await writeTree(modules, {
    'ev/trunk/ev/manifests/init.pp': `class ev {\n  $a = inline_template('<%= File.write("${dir}/ran", "x") %>')\n  $b = generate('/bin/touch', '${dir}/ran')\n  notify { "\${a}\${b}\${undefined_var}": }\n}\n`,
    'ev/trunk/ev/manifests/deep.pp': `class ev::deep { $x = ${'['.repeat(3000)}1${']'.repeat(3000)} }\n`,
  })
  await writeFile(join(manifests, 'a_latin1.pp'), Buffer.concat([Buffer.from('# caf'), Buffer.from([0xe9]), Buffer.from('\nclass ev::a_latin1 {}\n')]))
  await writeFile(join(dir, 'input.yaml'), 'app: ev/trunk\nclasses: [ev]\n')
  const result = await cli(['validate', join(dir, 'input.yaml'), '--module-dir', modules, '--format', 'json', '--', ...isolatePuppet(dir)])
  t.is(result.exitCode, 65, result.stderr)
  const problems = JSON.parse(result.stdout).inputs[0].problems.map((p: {check: string; file: string; message: string}) => [p.check, p.file, p.message])
  t.is(problems.length, 3, JSON.stringify(problems))
  t.like(problems.find(([, file]: string[]) => file.endsWith('a_latin1.pp')), ['syntax'])
  t.regex(problems.find(([, file]: string[]) => file.endsWith('a_latin1.pp'))[2], /invalid byte sequence in UTF-8/)
  t.regex(problems.find(([, file]: string[]) => file.endsWith('deep.pp'))[2], /nested too deeply/)
  t.like(problems.find(([, file]: string[]) => file.endsWith('init.pp')), ['variables'])
  t.false(problems.some(([, , message]: string[]) => /stopped before checking/.test(message)))
  t.false(await stat(join(dir, 'ran')).then(() => true, () => false), 'validate only parses: nothing in a manifest runs')
})

// Issue 33: the variable check looked each read up in a list of the class's names: 20,000
// assignments in one class took 9 s of CPU, 40,000 took 37 s, a 1 MB manifest did not
// finish in 2 minutes, and nothing bounded a manifest's size. (Its times are in the bench,
// BENCH=validate-variables; here, that the results are right.)
const problemsOf = (stdout: string) => JSON.parse(stdout).inputs[0].problems as Array<{check: string; file: string; line: number; column: number; message: string}>

test('classes of 20,000 and 40,000 assignments: every local read is known, the one unknown variable of each is reported at its line and column', async (t) => {
  const dir = await tempDir(t)
  const tree: Tree = {'input.yaml': 'app: big/trunk\nclasses: [big20, big40]\n'}
  for (const count of [20_000, 40_000]) tree[`modules/big/trunk/big${count / 1000}/manifests/init.pp`] = assignmentsClass(`big${count / 1000}`, count, 'nope')
  await writeTree(dir, tree)
  const result = await cli(['validate', join(dir, 'input.yaml'), '--module-dir', join(dir, 'modules'), '--format', 'json', '--', ...isolatePuppet(dir)])
  t.is(result.exitCode, 65, result.stderr)
  const last = (count: number) => `  notice("\${v${count - 1}} \${nope}")`
  t.deepEqual(
    problemsOf(result.stdout).map((p) => [p.check, p.file, p.line, p.column]),
    [20_000, 40_000].map((count) => ['variables', `big/trunk/big${count / 1000}/manifests/init.pp`, count + 2, last(count).indexOf('nope') + 1]),
  )
})

test('a 1 MB manifest of 20,000 classes and resources on one long line, with a multibyte character: its unknown variables reported at their columns', async (t) => {
  const dir = await tempDir(t)
  const {code, line} = oneLineClasses(20_000, 10_000)
  t.true(Buffer.byteLength(code) > 1_000_000)
  await writeTree(dir, {'input.yaml': 'app: many/trunk\nclasses: [many]\n', 'modules/many/trunk/many/manifests/init.pp': code})
  const result = await cli(['validate', join(dir, 'input.yaml'), '--module-dir', join(dir, 'modules'), '--format', 'json', '--', ...isolatePuppet(dir)])
  t.is(result.exitCode, 65, result.stderr)
  // Puppet's columns count characters (é is one): the name of an interpolated ${x}, the $ of $x.
  t.deepEqual(
    problemsOf(result.stdout).map((p) => [p.check, p.line, p.column, /Unknown variable: .*? in class \w+(?:::\w+)*/.exec(p.message)?.[0]]),
    [
      ['variables', 3, line.indexOf('${nope}') + 3, "Unknown variable: 'nope' in class many::c10000"],
      ['variables', 3, line.indexOf('$other') + 1, "Unknown variable: 'other' in class many::c10000"],
    ],
  )
})

test('a manifest over the bound on one manifest\'s size is a problem naming it, not read and not given to Puppet; the module\'s other manifests are still checked', async (t) => {
  const dir = await tempDir(t)
  const padding = `# ${'x'.repeat(78)}\n`
  const over = `class over {}\n${padding.repeat(Math.ceil((4 * 1024 * 1024) / padding.length))}`
  await writeTree(dir, {
    'input.yaml': 'app: over/trunk\nclasses: [over::small]\n',
    'modules/over/trunk/over/manifests/init.pp': over,
    'modules/over/trunk/over/manifests/small.pp': 'class over::small {\n  $x = \n}\n',
  })
  const result = await cli(['validate', join(dir, 'input.yaml'), '--module-dir', join(dir, 'modules'), '--format', 'json', '--', ...isolatePuppet(dir)])
  t.is(result.exitCode, 65, result.stderr)
  const problems = problemsOf(result.stdout)
  t.deepEqual(
    problems.map((p) => [p.check, p.file]),
    [
      ['syntax', 'over/trunk/over/manifests/init.pp'],
      ['syntax', 'over/trunk/over/manifests/small.pp'],
    ],
  )
  t.is(problems[0].message, "over/trunk/over/manifests/init.pp: 4.0 MiB, over validate's bound of 4 MiB on one manifest: not checked (Puppet does not parse it, its classes and defines are not read)")
  const text = await cli(['validate', join(dir, 'input.yaml'), '--module-dir', join(dir, 'modules'), '--puppet', 'none'])
  t.is(text.exitCode, 65)
  t.regex(text.stdout, /over\/trunk\/over\/manifests\/init\.pp: 4\.0 MiB, over validate's bound/)
})

// validate's Puppet process replaces the lexer's rule for `[` (which copied the whole text
// before each one) by one that looks at the last character only: the answers must be Puppet's.
test('Puppet\'s reading of `[` is kept: after a blank, even a multibyte one, a list; after anything else, an access', async (t) => {
  const dir = await tempDir(t)
  await writeTree(dir, {
    'input.yaml': 'app: lex/trunk\nclasses: [lex]\n',
    'modules/lex/trunk/lex/manifests/init.pp': 'class lex {\n  $a = [1, 2][0]\n  $b = "é"[0]\n  $c = [1, 2]\u3000[0]\n  notice($a, $b, $c)\n}\n',
  })
  const result = await cli(['validate', join(dir, 'input.yaml'), '--module-dir', join(dir, 'modules'), '--format', 'json', '--', ...isolatePuppet(dir)])
  t.is(result.exitCode, 65, result.stderr)
  t.deepEqual(
    problemsOf(result.stdout).map((p) => [p.check, p.line, p.column, p.message.split(': ')[1]]),
    [['syntax', 4, 15, 'This Array Expression has no effect. A value was produced and then forgotten (one or more preceding expressions may have the wrong form)']],
  )
})
