import {existsSync} from 'node:fs'
import {readdir, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import test from 'ava'
import {XMLParser} from 'fast-xml-parser'

import {FIXTURES, cli, isolatePuppet} from '../helpers/cli.js'
import {tempDir} from '../helpers/temp.js'

/** A release with one module per rule: module data, types, autoloading, duplicates, failing functions. */
const RULES = join(FIXTURES, 'rules')
const MODULES = join(RULES, 'modules')
const input = (name: string) => join(RULES, 'inputs', name)
const base = ['--module-dir', MODULES, '--manifest', join(RULES, 'site.pp')]
const init = 'rules/tags/1.0.0/typed/manifests/init.pp:1'

type Report = {checks: string[]; inputs: Array<{file: string; compile?: {status: string; resources: number | null}; problems: Array<{check: string; file: string | null; line: number | null; message: string}>}>}
const byName = (report: Report) => Object.fromEntries(report.inputs.map((entry) => [entry.file.split('/').pop()!, entry]))

/** What the static pass finds, input by input (the compile check aside). */
const STATIC: Record<string, Array<[string, string]>> = {
  'bad-release.yaml': [['release', `${input('bad-release.yaml')}:1: release rules/tags/9.9.9: rules/tags/9.9.9 not found in ${MODULES}`]],
  'colon-keys.yaml': [
    ['parameters', `${input('colon-keys.yaml')}:4: class typed::server has no parameter adress (did you mean address?); it declares address (rules/tags/1.0.0/typed/manifests/server.pp:1)`],
    ['parameters', `${input('colon-keys.yaml')}:3: Class[Typed::Server]: expects a value for parameter 'address' (rules/tags/1.0.0/typed/manifests/server.pp:1)`],
    ['parameters', `${input('colon-keys.yaml')}:6: Class[Typed::Client]: parameter 'port' expects an Integer value, got String (rules/tags/1.0.0/typed/manifests/client.pp:1)`],
  ],
  'data-given.yaml': [],
  'data-missing.yaml': [['parameters', `${input('data-missing.yaml')}:3: Class[Data_mod]: expects a value for parameter 'nowhere' (rules/tags/1.0.0/data_mod/manifests/init.pp:2)`]],
  'duplicate.yaml': [],
  'failing.yaml': [],
  'good.yaml': [],
  'metaparameters.yaml': [],
  'not-loadable.yaml': [
    [
      'classes',
      `${input('not-loadable.yaml')}:3: class misplaced::wrong cannot be loaded (Puppet: Could not find class misplaced::wrong): it is in misplaced/manifests/helpers.pp, where Puppet's autoloader does not look for it (it reads misplaced/manifests/wrong.pp, misplaced/manifests/init.pp)`,
    ],
    [
      'classes',
      `${input('not-loadable.yaml')}:3: class acme_ssh cannot be loaded (Puppet: Could not find class acme_ssh): module directory acme-ssh is not a valid module name (lowercase letters, digits, underscores), so Puppet does not load it`,
    ],
  ],
  'wrong-types.yaml': [
    ['parameters', `${input('wrong-types.yaml')}:4: Class[Typed]: parameter 'enabled' expects a Boolean value, got String (${init})`],
    ['parameters', `${input('wrong-types.yaml')}:5: Class[Typed]: parameter 'port' expects a Typed::Port value, got Integer (${init})`],
    ['parameters', `${input('wrong-types.yaml')}:6: Class[Typed]: parameter 'ensure' expects a match for Enum['present', 'absent'], got 'latest' (${init})`],
    ['parameters', `${input('wrong-types.yaml')}:7: Class[Typed]: parameter 'digits' expects a match for Pattern[/\\A\\d+\\z/], got '12a' (${init})`],
    ['parameters', `${input('wrong-types.yaml')}:8: Class[Typed]: parameter 'label' expects an Optional[String[1]] value, got String (${init})`],
  ],
}

/** What Puppet itself says when it compiles each input with the RedHat fact set. */
const COMPILE: Record<string, ['compiled' | 'failed' | 'skipped', RegExp | null]> = {
  'bad-release.yaml': ['skipped', null],
  'colon-keys.yaml': ['failed', /Class\[Typed::Server\]: has no parameter named 'adress'; expects a value for parameter 'address'/],
  'data-given.yaml': ['compiled', null],
  'data-missing.yaml': ['failed', /Class\[Data_mod\]: expects a value for parameter 'nowhere'$/],
  'duplicate.yaml': ['failed', /Duplicate declaration: File\[\/tmp\/localpuppet-validate-dup\] is already declared at \(file: .*\/dup\/manifests\/a\.pp, line: 2\); cannot redeclare/],
  'failing.yaml': ['failed', /Error while evaluating a Function Call, typed::failing: the CI said so$/],
  'good.yaml': ['compiled', null],
  'metaparameters.yaml': ['compiled', null],
  'not-loadable.yaml': ['failed', /Could not find class (::)?misplaced::wrong/],
  'wrong-types.yaml': ['failed', /Class\[Typed\]: parameter 'enabled' expects a Boolean value, got String; parameter 'port' expects a Typed::Port = Integer\[1, 65535\] value/],
}

test('the static pass finds each rule, with the line of every kind of key', async (t) => {
  const result = await cli(['validate', join(RULES, 'inputs'), ...base, '--puppet', 'none', '--format', 'json'])
  t.is(result.exitCode, 65, result.stderr)
  const report = JSON.parse(result.stdout) as Report
  t.deepEqual(report.checks, ['input', 'release', 'classes', 'parameters', 'syntax', 'variables', 'metadata', 'requirements'])
  t.deepEqual(
    Object.fromEntries(Object.entries(byName(report)).map(([name, entry]) => [name, entry.problems.map((p) => [p.check, p.message])])),
    STATIC,
  )
})

test('--compile: Puppet compiles every input in one run, agrees with the static pass, and names its file and line', async (t) => {
  const dir = await tempDir(t)
  const result = await cli(['validate', join(RULES, 'inputs'), ...base, '--compile', '--facts', join(RULES, 'facts', 'redhat.json'), '--format', 'json', '--', ...isolatePuppet(dir)])
  t.is(result.exitCode, 65, result.stderr)
  const report = JSON.parse(result.stdout) as Report
  t.deepEqual(report.checks, ['input', 'release', 'classes', 'parameters', 'syntax', 'variables', 'metadata', 'requirements', 'compile'])
  for (const [name, entry] of Object.entries(byName(report))) {
    const [status, message] = COMPILE[name]
    t.is(entry.compile?.status, status, name)
    const compile = entry.problems.filter((p) => p.check === 'compile')
    t.is(compile.length, message ? 1 : 0, name)
    if (message) t.regex(compile[0].message, message, name)
    t.true(compile.every((p) => p.message.startsWith(`${entry.file}:`)), `${name}: the problem names the input`)
    // Whatever the static pass finds about classes and parameters, Puppet refuses too.
    t.deepEqual(entry.problems.filter((p) => p.check !== 'compile'), STATIC[name].map(([check, text]) => ({check, file: entry.file, line: entry.problems.find((p) => p.message === text)?.line ?? null, column: null, message: text})), name)
    if (STATIC[name].some(([check]) => check === 'classes' || check === 'parameters')) t.is(status, 'failed', `${name}: static problems mean Puppet fails`)
  }

  // Puppet names no file for a class of the ENC document: the problem points at the input's line.
  const missing = byName(report)['data-missing.yaml'].problems.find((p) => p.check === 'compile')!
  t.deepEqual([missing.file, missing.line, missing.message.slice(0, input('data-missing.yaml').length + 3)], [input('data-missing.yaml'), 3, `${input('data-missing.yaml')}:3:`])
  const notFound = byName(report)['not-loadable.yaml'].problems.find((p) => p.check === 'compile')!
  t.deepEqual([notFound.file, notFound.line], [input('not-loadable.yaml'), 3])
  const duplicate = byName(report)['duplicate.yaml'].problems[0]
  t.deepEqual([duplicate.file, duplicate.line], ['rules/tags/1.0.0/dup/manifests/b.pp', 2])
  const failing = byName(report)['failing.yaml'].problems[0]
  t.deepEqual([failing.file, failing.line], ['rules/tags/1.0.0/typed/manifests/failing.pp', 4])
  // Each wrong type the static pass names is one Puppet names.
  const puppetSays = byName(report)['wrong-types.yaml'].problems.find((p) => p.check === 'compile')!.message
  for (const param of ['enabled', 'port', 'ensure', 'digits', 'label']) t.regex(puppetSays, new RegExp(`parameter '${param}' expects`))
  const written = existsSync(join(dir, 'puppet')) ? (await readdir(join(dir, 'puppet'), {recursive: true, withFileTypes: true})).filter((entry) => !entry.isDirectory()) : []
  t.deepEqual(written, [], 'Puppet wrote nothing: no state, no report, no cached catalog')
})

test('--compile --facts DIR: one fact set per input name, an input without one is a problem', async (t) => {
  const dir = await tempDir(t)
  const result = await cli(['validate', input('data-given.yaml'), input('good.yaml'), ...base, '--compile', '--facts', join(RULES, 'facts-by-name'), '--format', 'junit', '--', ...isolatePuppet(dir)])
  t.is(result.exitCode, 65, result.stderr)
  const xml = new XMLParser({ignoreAttributes: false, attributeNamePrefix: '', isArray: (name) => ['testsuite', 'testcase', 'failure'].includes(name)}).parse(result.stdout)
  const suites = xml.testsuites.testsuite as Array<{name: string; testcase: Array<{name: string; failure?: Array<{message: string}>; skipped?: {message: string}}>}>
  for (const suite of suites) t.deepEqual(suite.testcase.map((c) => c.name), ['input', 'release', 'classes', 'parameters', 'syntax', 'variables', 'metadata', 'requirements', 'compile'])
  const compileOf = (name: string) => suites.find((s) => s.name.endsWith(name))!.testcase.find((c) => c.name === 'compile')!
  // Debian facts (puppet facts YAML, Ruby tag and all): RedHat.yaml is not read, on_redhat has no value.
  t.regex(compileOf('data-given.yaml').failure![0].message, /Class\[Data_mod\]: expects a value for parameter 'on_redhat'/)
  t.is(compileOf('good.yaml').failure![0].message, `${input('good.yaml')}: --facts: no fact set for good in ${join(RULES, 'facts-by-name')} (good.json, good.yaml, good.yml)`)
})

test('--format junit with --compile: a compile testcase per input, skipped when the input cannot be compiled', async (t) => {
  const dir = await tempDir(t)
  const result = await cli(['validate', input('bad-release.yaml'), input('metaparameters.yaml'), ...base, '--compile', '--facts', join(RULES, 'facts', 'redhat.json'), '--format', 'junit', '--', ...isolatePuppet(dir)])
  t.is(result.exitCode, 65, result.stderr)
  const xml = new XMLParser({ignoreAttributes: false, attributeNamePrefix: '', isArray: (name) => ['testsuite', 'testcase', 'failure'].includes(name)}).parse(result.stdout)
  t.is(xml.testsuites.tests, '18')
  t.is(xml.testsuites.skipped, '1')
  const [bad, meta] = xml.testsuites.testsuite as Array<{testcase: Array<{name: string; failure?: unknown; skipped?: {message: string}}>}>
  t.is(bad.testcase.at(-1)!.skipped!.message, 'not compiled: the input or its release has problems')
  t.deepEqual(meta.testcase.filter((c) => c.failure || c.skipped), [])
})

test('classes: where each default comes from, and what Puppet cannot load', async (t) => {
  const result = await cli(['classes', 'rules/tags/1.0.0', '--module-dir', MODULES, '--json'])
  t.is(result.exitCode, 0, result.stderr)
  const {definitions} = JSON.parse(result.stdout) as {definitions: Array<{name: string; notLoadable: string | null; parameters: Array<{name: string; source: string; data: unknown; nodeDependent: string[]}>}>}
  const dataMod = definitions.find((d) => d.name === 'data_mod')!
  t.deepEqual(
    dataMod.parameters.map((p) => [p.name, p.source, p.data, p.nodeDependent]),
    [
      ['from_data', 'module data', {value: 'from common.yaml', file: 'data_mod/data/common.yaml', line: 2, level: 'common'}, []],
      ['on_redhat', 'required', null, ['Operating system family']],
      ['nowhere', 'required', null, []],
      ['port', 'module data', {value: 8080, file: 'data_mod/data/common.yaml', line: 3, level: 'common'}, []],
    ],
  )
  t.deepEqual(
    definitions.filter((d) => d.notLoadable !== null).map((d) => d.name),
    ['acme_ssh', 'misplaced::wrong'],
  )
  const human = await cli(['classes', 'rules/tags/1.0.0', '--module-dir', MODULES])
  t.regex(human.stdout, /^ {4}Integer \$port = 8080 {2}\(module data data_mod\/data\/common\.yaml:3\)$/m)
  t.regex(human.stdout, /^ {4}String \$on_redhat {2}\(required; module data may set it on some nodes: Operating system family\)$/m)
  t.regex(human.stdout, /^class {2}misplaced::wrong {2}rules\/tags\/1\.0\.0\/misplaced\/manifests\/helpers\.pp:2 {2}\(not loadable: it is in misplaced\/manifests\/helpers\.pp, /m)
})

test("--compile without --facts: this machine's facts, from Facter in the same Puppet process", async (t) => {
  const dir = await tempDir(t)
  const site = join(dir, 'site.pp')
  await writeFile(site, "notify { \"kernel ${facts['kernel']}\": }\nif $facts['kernel'] != 'Linux' { fail('no facts') }\n")
  const result = await cli(['validate', input('metaparameters.yaml'), '--module-dir', MODULES, '--manifest', site, '--compile', '--format', 'json', '--', ...isolatePuppet(dir)])
  t.is(result.exitCode, 0, result.stdout + result.stderr)
  t.like(JSON.parse(result.stdout).inputs[0], {compile: {status: 'compiled'}, problems: []})
})
