import {copyFile, readFile, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import test from 'ava'
import {execa} from 'execa'

import {XMLParser} from 'fast-xml-parser'

import {cli, isolatePuppet, statusJson} from '../helpers/cli.js'
import {tempDir, writeTree} from '../helpers/temp.js'

// Real Puppet, whichever runs these tests: Debian 12's 7.23 on the host, Debian 13's 8.10
// in bin/debian13's chroot (see the README). Each assertion holds on both.

/** The puppet on PATH, as its own --version says (only to compare: localpuppet never asks it). */
const puppetVersion = async () => (await execa('puppet', ['--version'])).stdout.trim()

type Report = {inputs: Array<{problems: Array<{check: string; file: string; line: number; column: number; message: string}>; warnings: Array<{check: string; message: string}>; skipped: Record<string, string>; compile?: {status: string}}>}
const validateJson = async (args: string[]) => {
  const end = args.includes('--') ? args.indexOf('--') : args.length
  const result = await cli(['validate', ...args.slice(0, end), '--format', 'json', ...args.slice(end)])
  return {exitCode: result.exitCode, stderr: result.stderr, report: JSON.parse(result.stdout) as Report}
}

/** A module directory with one release per language mode, each using a variable nobody defines. */
async function releases(t: Parameters<typeof tempDir>[0]) {
  const dir = await tempDir(t)
  const uses = (name: string) => `class ${name} {\n  notify { "value: [\${nobody_sets_this}]": }\n}\n`
  await writeTree(join(dir, 'modules'), {
    'pinned/tags/1.0.0/manifest.yaml': 'strict: error\nstrict_variables: true\n',
    'pinned/tags/1.0.0/pinned/manifests/init.pp': uses('pinned'),
    // Under strict=error Puppet fails on an unknown variable whatever strict_variables says: Puppet 7's defaults, pinned.
    'loose/tags/1.0.0/manifest.yaml': 'strict: warning\nstrict_variables: false\n',
    'loose/tags/1.0.0/loose/manifests/init.pp': uses('loose'),
    'plain/tags/1.0.0/plain/manifests/init.pp': uses('plain'),
    // Puppet fails on the unknown variable under strict=error even with strict_variables false.
    'strict/tags/1.0.0/manifest.yaml': 'strict: error\nstrict_variables: false\n',
    'strict/tags/1.0.0/strict/manifests/init.pp': uses('strict'),
    'stale/tags/1.0.0/stale/manifests/init.pp': 'class stale {}\n',
    'stale/tags/1.0.0/stale/metadata.json': JSON.stringify({name: 'acme-stale', version: '1.0.0', author: 'acme', license: 'MIT', summary: 's', source: 's', dependencies: [], requirements: [{name: 'puppet', version_requirement: '>= 4.0.0 < 7.0.0'}]}),
    'future/tags/1.0.0/future/manifests/init.pp': 'class future {}\n',
    'future/tags/1.0.0/future/metadata.json': `{\n  "name": "acme-future",\n  "version": "1.0.0",\n  "author": "acme", "license": "MIT", "summary": "s", "source": "s", "dependencies": [],\n  "requirements": [\n    {"name": "puppet", "version_requirement": ">= 9.0.0 < 10.0.0"}\n  ]\n}\n`,
  })
  const input = async (app: string) => {
    const file = join(dir, `${app}.yaml`)
    await writeFile(file, `app: ${app}/tags/1.0.0\nclasses:\n  - ${app}\n`)
    return file
  }

  return {dir, modules: join(dir, 'modules'), state: join(dir, 'state'), input}
}

test('which Puppet ran is recorded: run record, plan --json, status and the metrics', async (t) => {
  const {dir, modules, state, input} = await releases(t)
  const file = await input('loose')
  const expected = {implementation: 'puppet', version: await puppetVersion(), path: (await execa('sh', ['-c', 'command -v puppet'])).stdout.trim()}

  const plan = await cli(['plan', file, '--module-dir', modules, '--state-dir', state, '--json'])
  t.is(plan.exitCode, 0, plan.stderr)
  t.like(JSON.parse(plan.stdout).puppet, {...expected, command: 'puppet', found: 'PATH'})
  // Nothing OpenVox 9 removed; what it changed the default of, explicit.
  const {command} = JSON.parse(plan.stdout) as {command: string[]}
  t.deepEqual(command.filter((arg) => /^--(no-)?(configprint|pluginsync)\b/.test(arg)), [])
  t.true(['--reports', '--lastrunfile', '--lastrunreport'].every((arg) => command.includes(arg)))

  const metrics = join(dir, 'metrics.prom')
  const applied = await cli(['apply', file, '--module-dir', modules, '--state-dir', state, '--metrics-file', metrics, '--', ...isolatePuppet(dir)])
  t.is(applied.exitCode, 0, applied.stderr)
  const {record} = await statusJson(state)
  t.deepEqual(record.puppet, expected)
  const human = await cli(['status', '--state-dir', state])
  t.regex(human.stdout, new RegExp(`puppet\\s+puppet ${expected.version.replaceAll('.', '\\.')}  ${expected.path}`))
  t.true((await readFile(metrics, 'utf8')).includes(`localpuppet_puppet_info{implementation="puppet",version="${expected.version}",path="${expected.path}"} 1`))

  const config = await cli(['config', '--json'])
  t.like(JSON.parse(config.stdout).puppet, {path: expected.path, found: 'PATH', implementation: 'puppet', version: expected.version, why: 'puppet, the default, found on PATH'})
})

test('strict_variables pinned true: an undefined variable fails apply and validate --compile alike, on every Puppet', async (t) => {
  const {dir, modules, state, input} = await releases(t)
  for (const app of ['pinned', 'plain']) {
    const file = await input(app)
    const applied = await cli(['apply', file, '--module-dir', modules, '--state-dir', state, '--', ...isolatePuppet(dir)])
    t.is(applied.exitCode, 1, `${app}: the catalog does not compile`)
    const {record} = await statusJson(state)
    t.is(record.state, 'failed')
    t.regex(record.firstError, /Unknown variable: '(::)?nobody_sets_this'/, app)
    t.like(record.languageMode, {strict: 'error', strictVariables: true, pinned: app === 'pinned' ? 'pinned/tags/1.0.0/manifest.yaml' : null})
    t.true(record.command.includes('--strict_variables'))

    const validated = await cli(['validate', file, '--module-dir', modules, '--compile', '--format', 'json', '--', ...isolatePuppet(dir)])
    t.is(validated.exitCode, 65, validated.stderr)
    const report = JSON.parse(validated.stdout)
    t.regex(report.inputs[0].problems.find((p: {check: string}) => p.check === 'compile').message, /Unknown variable: '(::)?nobody_sets_this'/)
  }
})

test('strict_variables pinned false (and strict warning): the same code compiles on every Puppet; --replay compiles as the run did, not as manifest.yaml now says', async (t) => {
  const {dir, modules, state, input} = await releases(t)
  const file = await input('loose')
  const applied = await cli(['apply', file, '--module-dir', modules, '--state-dir', state, '--', ...isolatePuppet(dir)])
  t.is(applied.exitCode, 0, applied.stderr)
  t.regex(applied.stdout, /Notice: value: \[\]/)
  const {record} = await statusJson(state)
  t.deepEqual(record.languageMode, {strict: 'warning', strictVariables: false, pinned: 'loose/tags/1.0.0/manifest.yaml'})
  t.true(record.command.includes('--no-strict_variables'))

  const validated = await cli(['validate', file, '--module-dir', modules, '--compile', '--format', 'json', '--', ...isolatePuppet(dir)])
  t.is(validated.exitCode, 0, validated.stdout)

  // A trunk whose manifest.yaml pins Puppet 8's mode after the run: the replay must compile as the run did.
  await writeTree(modules, {'loose/trunk/manifest.yaml': 'strict: warning\nstrict_variables: false\n', 'loose/trunk/loose/manifests/init.pp': await readFile(join(modules, 'loose/tags/1.0.0/loose/manifests/init.pp'), 'utf8')})
  const trunk = join(dir, 'trunk.yaml')
  await writeFile(trunk, 'app: loose/trunk\nclasses:\n  - loose\n')
  const ran = await cli(['apply', trunk, '--module-dir', modules, '--state-dir', state, '--allow-mutable', '--json', '--', ...isolatePuppet(dir)])
  t.is(ran.exitCode, 0, ran.stderr)
  const run = JSON.parse(ran.stdout)
  t.deepEqual(run.languageMode, {strict: 'warning', strictVariables: false, pinned: 'loose/trunk/manifest.yaml'})
  await writeFile(join(modules, 'loose/trunk/manifest.yaml'), 'strict: error\nstrict_variables: true\n')
  const now = await cli(['apply', trunk, '--module-dir', modules, '--state-dir', state, '--allow-mutable', '--', ...isolatePuppet(dir)])
  t.is(now.exitCode, 1, 'the trunk as it is now does not compile')
  const replayed = await cli(['apply', '--replay', run.id, '--allow-mutable', '--module-dir', modules, '--state-dir', state, '--json', '--', ...isolatePuppet(dir)])
  t.is(replayed.exitCode, 0, replayed.stderr)
  const replay = JSON.parse(replayed.stdout)
  t.is(replay.state, 'succeeded')
  t.deepEqual(replay.languageMode, run.languageMode)
  t.true(replay.command.includes('--no-strict_variables'))
})

test('strict: error with strict_variables false: an unknown variable still fails, on every Puppet, and static validate says so', async (t) => {
  const {dir, modules, state, input} = await releases(t)
  const file = await input('strict')
  const applied = await cli(['apply', file, '--module-dir', modules, '--state-dir', state, '--', ...isolatePuppet(dir)])
  t.is(applied.exitCode, 1, 'the catalog does not compile')
  const {record} = await statusJson(state)
  t.regex(record.firstError, /Unknown variable: '(::)?nobody_sets_this'/)
  t.like(record.languageMode, {strict: 'error', strictVariables: false})
  t.true(record.command.includes('--no-strict_variables'))

  const {exitCode, report} = await validateJson([file, '--module-dir', modules, '--', ...isolatePuppet(dir)])
  t.is(exitCode, 65)
  t.deepEqual(
    report.inputs[0].problems.map((p) => p.message),
    ["strict/tags/1.0.0/strict/manifests/init.pp:2:23: Unknown variable: 'nobody_sets_this' in class strict: no parameter, local variable, ENC parameter or fact has that name; Puppet fails on it under strict: error (pinned by strict/tags/1.0.0/manifest.yaml)"],
  )
})

test('static validate (no --compile) reports a variable Puppet would not find under strict_variables, with file, line and name, as Puppet does', async (t) => {
  const {dir, modules, input} = await releases(t)
  const major = Number((await puppetVersion()).split('.')[0])
  await writeTree(modules, {
    // Everything a class may read without defining it: what Puppet must not be blamed for.
    'clean/tags/1.0.0/clean/manifests/init.pp': [
      'class clean (String $greeting = "hello ${title}") inherits clean::params {',
      '  $local = [1, 2].map |$n| { $n + $from_params }',
      '  [$first, $second] = [$facts["os"]["family"], $trusted["certname"]]',
      '  if $module_name =~ /^(c)/ { $matched = $1 }',
      '  notify { "${greeting} ${local} ${first} ${second} ${site_role} ${::acme_role} ${environment} ${clientcert} ${::kernel} ${localpuppet_release}": }',
      '  clean::thing { "x": }',
      '}',
    ].join('\n'),
    'clean/tags/1.0.0/clean/manifests/params.pp': 'class clean::params { $from_params = 1 }\n',
    'clean/tags/1.0.0/clean/manifests/thing.pp': 'define clean::thing ($size = 1) { notify { "${name} ${size} ${caller_module_name}": } }\n',
    'clean/tags/1.0.0/clean/lib/facter/acme_role.rb': "Facter.add(:acme_role) do\n  setcode { 'web' }\nend\n",
    // Never declared by anything the input names: not judged.
    'clean/tags/1.0.0/clean/manifests/unused.pp': 'class clean::unused { notify { $nobody_sets_this: } }\n',
    'broken/tags/1.0.0/broken/manifests/init.pp': 'class broken ($given = "x") {\n  include broken::inner\n}\n',
    'broken/tags/1.0.0/broken/manifests/inner.pp': 'class broken::inner {\n  notify { "${given} ${::no_such_fact}": }\n  [1].each |$i| { notify { "${i}": } }\n  notify { "${i}": }\n  if $facts["kernel"] == "none" { notify { $maybe: } }\n}\n',
    'legacy/tags/1.0.0/legacy/manifests/init.pp': 'class legacy {\n  notify { "family: ${::osfamily}": }\n}\n',
  })
  await writeFile(join(dir, 'clean.yaml'), 'app: clean/tags/1.0.0\nparameters:\n  site_role: web\nclasses:\n  - clean\n')
  const clean = await validateJson([join(dir, 'clean.yaml'), '--module-dir', modules, '--compile', '--', ...isolatePuppet(dir)])
  t.is(clean.exitCode, 0, JSON.stringify(clean.report.inputs[0].problems))
  t.is(clean.report.inputs[0].compile?.status, 'compiled', 'Puppet agrees: nothing unknown')

  const broken = await validateJson([await input('broken'), '--module-dir', modules, '--', ...isolatePuppet(dir)])
  t.is(broken.exitCode, 65)
  t.deepEqual(
    broken.report.inputs[0].problems.map((p) => [p.check, p.file, p.line, p.column, p.message.replace(/: no parameter.*$/, '')]),
    [
      ['variables', 'broken/tags/1.0.0/broken/manifests/inner.pp', 2, 15, "broken/tags/1.0.0/broken/manifests/inner.pp:2:15: Unknown variable: 'given' in class broken::inner"],
      ['variables', 'broken/tags/1.0.0/broken/manifests/inner.pp', 2, 24, "broken/tags/1.0.0/broken/manifests/inner.pp:2:24: Unknown variable: '::no_such_fact' in class broken::inner"],
      ['variables', 'broken/tags/1.0.0/broken/manifests/inner.pp', 4, 15, "broken/tags/1.0.0/broken/manifests/inner.pp:4:15: Unknown variable: 'i' in class broken::inner"],
    ],
  )
  t.regex(broken.report.inputs[0].problems[0].message, /; Puppet fails on it under strict_variables: true \(the default: the release pins neither, so Puppet 8's\)$/)
  // In code Puppet may skip (a branch here): a warning, not a problem.
  t.deepEqual(
    broken.report.inputs[0].warnings.filter((w) => w.check === 'variables').map((w) => w.message),
    ["broken/tags/1.0.0/broken/manifests/inner.pp:5:44: Unknown variable: 'maybe' in class broken::inner: no parameter, local variable, ENC parameter or fact has that name; Puppet fails on it under strict_variables: true (the default: the release pins neither, so Puppet 8's) if it evaluates this code, which depends on a condition, a loop, a default or a conditional declaration"],
  )
  const compiled = await validateJson([await input('broken'), '--module-dir', modules, '--compile', '--', ...isolatePuppet(dir)])
  t.regex(compiled.report.inputs[0].problems.find((p) => p.check === 'compile')!.message, /inner\.pp:2:15: .*Unknown variable: 'given'/, 'Puppet fails on the first, where validate says')

  // A legacy fact: Puppet 7 collects them, Puppet 8 does not; validate and Puppet agree on each.
  const legacy = await validateJson([await input('legacy'), '--module-dir', modules, '--compile', '--', ...isolatePuppet(dir)])
  const problems = legacy.report.inputs[0].problems.map((p) => `${p.check}: ${p.message}`)
  if (major < 8) t.deepEqual(problems, [])
  else {
    t.is(problems.length, 2, problems.join('\n'))
    t.is(problems[0], "variables: legacy/tags/1.0.0/legacy/manifests/init.pp:2:23: Unknown variable: '::osfamily' in class legacy: a legacy fact, which this Puppet does not collect (include_legacy_facts is false): use $facts['os']['family']; Puppet fails on it under strict_variables: true (the default: the release pins neither, so Puppet 8's)")
    t.regex(problems[1], /^compile: .*init\.pp:2:23: .*Unknown variable: '::osfamily'/)
  }

  // Pinned loose: nothing to report, and JUnit says the check did not run rather than passed.
  const loose = await cli(['validate', await input('loose'), '--module-dir', modules, '--format', 'junit', '--', ...isolatePuppet(dir)])
  t.is(loose.exitCode, 0, loose.stdout)
  const xml = new XMLParser({ignoreAttributes: false, attributeNamePrefix: ''}).parse(loose.stdout)
  const variables = xml.testsuites.testsuite.testcase.find((c: {name: string}) => c.name === 'variables')
  t.is(variables.skipped.message, 'not checked: under strict: warning with strict_variables: false Puppet does not fail on an unknown variable')
})

test("metadata.json: missing keys make Puppet refuse a module under every strict, an unparsable one only under strict: error; validate says which", async (t) => {
  const {dir, modules, state} = await releases(t)
  const metadata = {name: 'acme-x', version: '1.0.0', author: 'acme', license: 'MIT', summary: 's', source: 's', dependencies: []}
  await writeTree(modules, {
    'nosource/tags/1.0.0/manifest.yaml': 'strict: warning\n',
    'nosource/tags/1.0.0/nosource/manifests/init.pp': "class nosource { notify { 'nosource loaded': } }\n",
    'nosource/tags/1.0.0/nosource/metadata.json': JSON.stringify({...metadata, source: undefined}),
    'badjson/tags/1.0.0/manifest.yaml': 'strict: warning\n',
    'badjson/tags/1.0.0/badjson/manifests/init.pp': "class badjson { notify { 'badjson loaded': } }\n",
    'badjson/tags/1.0.0/badjson/metadata.json': '{\n  "name": "acme-badjson",\n  "version": \n}\n',
    'badjson/tags/2.0.0/badjson/manifests/init.pp': "class badjson { notify { 'badjson loaded': } }\n",
    'badjson/tags/2.0.0/badjson/metadata.json': '{\n  "name": "acme-badjson",\n  "version": \n}\n',
  })
  const input = async (app: string, tag: string) => {
    const file = join(dir, `${app}-${tag}.yaml`)
    await writeFile(file, `app: ${app}/tags/${tag}\nclasses:\n  - ${app}\n`)
    return file
  }

  const cases: Array<[string, string, number, RegExp | null]> = [
    ['nosource', '1.0.0', 1, /^problem metadata nosource\/tags\/1\.0\.0\/nosource\/metadata\.json:1: module nosource: metadata\.json lacks "source"; Puppet refuses the module whatever strict says \(No source module metadata provided for nosource\)$/],
    ['badjson', '1.0.0', 0, /^warning metadata badjson\/tags\/1\.0\.0\/badjson\/metadata\.json(:\d+)?: module badjson: metadata\.json is not valid JSON \(.+\); under strict: warning Puppet loads the module without it, under strict: error it refuses the module$/],
    ['badjson', '2.0.0', 1, /^problem metadata badjson\/tags\/2\.0\.0\/badjson\/metadata\.json(:\d+)?: module badjson: metadata\.json is not valid JSON \(.+\); under strict: error Puppet refuses the module \(Could not find class badjson\)$/],
  ]
  for (const [app, tag, exit, expected] of cases) {
    const file = await input(app, tag)
    const applied = await cli(['apply', file, '--module-dir', modules, '--state-dir', state, '--', ...isolatePuppet(dir)])
    t.is(applied.exitCode, exit, `${app} ${tag}: ${applied.stderr}`)
    // Puppet logs why it dropped the module, then cannot find its class.
    if (exit === 1) t.regex((await statusJson(state)).record.firstError, app === 'nosource' ? /No source module metadata provided for nosource/ : /badjson has an invalid and unparsable metadata\.json/)
    const {report} = await validateJson([file, '--module-dir', modules, '--', ...isolatePuppet(dir)])
    const found = [...report.inputs[0].problems.map((p) => ({...p, severity: 'problem'})), ...report.inputs[0].warnings.map((w) => ({...w, severity: 'warning'}))].filter((p) => p.check === 'metadata')
    t.is(found.length, 1, `${app} ${tag}: ${JSON.stringify(report.inputs[0])}`)
    t.regex(`${found[0].severity} ${found[0].check} ${found[0].message.replace(`${file}: `, '')}`, expected!)
  }
})

test('requirements against a Puppet nothing identifies: a warning and a skipped JUnit case, not a pass; a Ruby copy is judged by the library it loads', async (t) => {
  const {dir, modules, input} = await releases(t)
  const file = await input('future')
  await writeTree(dir, {'wrapper/puppet': {mode: 0o755, content: '#!/bin/sh\nexec puppet "$@"\n'}})
  const wrapper = join(dir, 'wrapper', 'puppet')
  const skipped = `requirements not checked: cannot tell which Puppet ${wrapper} is (neither a package nor a gem owns it: a wrapper script?)`
  const junit = await cli(['validate', file, '--module-dir', modules, '--puppet', wrapper, '--format', 'junit', '--', ...isolatePuppet(dir)])
  t.is(junit.exitCode, 0, junit.stdout)
  const xml = new XMLParser({ignoreAttributes: false, attributeNamePrefix: ''}).parse(junit.stdout)
  t.is(xml.testsuites.testsuite.testcase.find((c: {name: string}) => c.name === 'requirements').skipped.message, skipped)
  const text = await cli(['validate', file, '--module-dir', modules, '--puppet', wrapper, '--', ...isolatePuppet(dir)])
  t.true(text.stdout.includes(`warning      ${file}: ${skipped}`), text.stdout)
  const none = await validateJson([file, '--module-dir', modules, '--puppet', 'none'])
  t.is(none.report.inputs[0].skipped.requirements, 'requirements not checked: --puppet none, so no Puppet to check them against')

  // A copy of the packaged puppet (a Ruby script nothing owns) runs the packaged library: judged by it.
  await copyFile((await execa('sh', ['-c', 'command -v puppet'])).stdout.trim(), join(dir, 'puppet-copy'))
  const copied = await validateJson([file, '--module-dir', modules, '--puppet', join(dir, 'puppet-copy'), '--', ...isolatePuppet(dir)])
  t.is(copied.exitCode, 65)
  t.regex(copied.report.inputs[0].problems[0].message, new RegExp(`module future requires puppet >= 9\\.0\\.0 < 10\\.0\\.0; this is puppet ${(await puppetVersion()).replaceAll('.', '\\.')} `))
})

test('validate checks module requirements against the Puppet it runs with: puppet >= 9 is a problem, a stale upper bound a warning', async (t) => {
  const {modules, input} = await releases(t)
  const version = await puppetVersion()
  const future = await cli(['validate', await input('future'), '--module-dir', modules, '--format', 'json'])
  t.is(future.exitCode, 65, future.stderr)
  const report = JSON.parse(future.stdout)
  t.deepEqual(
    report.inputs[0].problems.map((p: {check: string; file: string; line: number; message: string}) => [p.check, p.file, p.line, p.message.replace(/\(.*\)$/, '(...)')]),
    [['requirements', 'future/tags/1.0.0/future/metadata.json', 6, `${await input('future')}: future/tags/1.0.0/future/metadata.json:6: module future requires puppet >= 9.0.0 < 10.0.0; this is puppet ${version} (...)`]],
  )
  t.like(report.puppet, {implementation: 'puppet', version})

  const stale = await cli(['validate', await input('stale'), '--module-dir', modules])
  t.is(stale.exitCode, 0, stale.stdout)
  t.regex(stale.stdout, new RegExp(`warning\\s+.*stale/tags/1\\.0\\.0/stale/metadata\\.json:1: module stale requires puppet >= 4\\.0\\.0 < 7\\.0\\.0; puppet ${version.replaceAll('.', '\\.')} .* is newer than that`))
})
