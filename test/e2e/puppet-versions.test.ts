import {readFile, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import test from 'ava'
import {execa} from 'execa'

import {cli, isolatePuppet, statusJson} from '../helpers/cli.js'
import {tempDir, writeTree} from '../helpers/temp.js'

// Real Puppet, whichever runs these tests: Debian 12's 7.23 on the host, Debian 13's 8.10
// in bin/debian13's chroot (see the README). Each assertion holds on both.

/** The puppet on PATH, as its own --version says (only to compare: localpuppet never asks it). */
const puppetVersion = async () => (await execa('puppet', ['--version'])).stdout.trim()

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
    'plain/tags/1.0.0/plain/metadata.json': JSON.stringify({name: 'acme-plain', version: '1.0.0', author: 'acme', license: 'MIT', summary: 's', source: 's', dependencies: [], requirements: [{name: 'puppet', version_requirement: '>= 4.0.0 < 7.0.0'}]}),
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

test('strict_variables pinned false (and strict warning): the same code compiles on every Puppet, and --replay keeps the mode', async (t) => {
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

  const replayed = await cli(['apply', '--replay', record.id, '--module-dir', modules, '--state-dir', state, '--json', '--', ...isolatePuppet(dir)])
  t.is(replayed.exitCode, 0, replayed.stderr)
  t.deepEqual(JSON.parse(replayed.stdout).languageMode, record.languageMode)
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

  const stale = await cli(['validate', await input('plain'), '--module-dir', modules])
  t.is(stale.exitCode, 0, stale.stdout)
  t.regex(stale.stdout, new RegExp(`warning\\s+.*plain/tags/1\\.0\\.0/plain/metadata\\.json:1: module plain requires puppet >= 4\\.0\\.0 < 7\\.0\\.0; puppet ${version.replaceAll('.', '\\.')} .* is newer than that`))
})
