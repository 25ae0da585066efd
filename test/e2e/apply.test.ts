import {existsSync} from 'node:fs'
import {setTimeout as sleep} from 'node:timers/promises'
import {readFile, readdir, stat} from 'node:fs/promises'
import {join} from 'node:path'

import test from 'ava'

import {FIXTURES, cli, isolatePuppet, startCli, statusJson} from '../helpers/cli.js'
import {tempDir, writeTree} from '../helpers/temp.js'

// Real `puppet apply` (Debian's puppet-agent) on every test in this file.
const DEMO = join(FIXTURES, 'demo')

async function applyDemo(t: Parameters<typeof tempDir>[0], args: string[] = [], input = join(DEMO, 'input.yaml')) {
  const dir = await tempDir(t)
  const state = join(dir, 'state')
  const result = await cli(['apply', input, '--module-dir', join(DEMO, 'modules'), '--state-dir', state, ...args, '--', ...isolatePuppet(dir)])
  return {dir, state, result}
}


test('the demo release applies with both notices, and status and log tell how it went', async (t) => {
  const {state, result} = await applyDemo(t)
  t.is(result.exitCode, 0, result.stderr)
  t.regex(result.stdout, /Notice: I notify you!/)
  t.regex(result.stdout, /Notice: platform class/)
  t.regex(result.stdout, /foo listens on 8080/)
  t.regex(result.stderr, /succeeded foo\/tags\/1\.4\.0, 3 changed, 0 failed/)

  const {exitCode, record} = await statusJson(state)
  t.is(exitCode, 0)
  t.is(record.state, 'succeeded')
  t.is(record.release, 'foo/tags/1.4.0')
  t.is(record.ref, 'foo@^1.4')
  t.deepEqual(
    record.modulepath.map((path: string) => path.slice(path.indexOf('modules/') + 8)),
    ['foo/tags/1.4.0', 'dist/tags/2.0.1'],
  )
  t.is(record.exitCode, 0)
  t.is(record.puppetExitCode, 2)
  t.like(record.resources, {changed: 3, failed: 0, outOfSync: 3, total: record.resources.total})
  t.regex(record.inputDigest, /^sha256:[0-9a-f]{64}$/)
  t.is(typeof record.durationMs, 'number')

  const human = await cli(['status', '--state-dir', state])
  t.regex(human.stdout, /state\s+succeeded/)
  const log = await cli(['log', '--state-dir', state])
  t.is(log.exitCode, 0)
  t.regex(log.stdout, /Notice: I notify you!/)
  t.notRegex(log.stdout, /\u001B\[/, 'the log holds no terminal colour codes')

  const runDir = join(state, 'runs', record.id)
  t.is((await stat(runDir)).mode & 0o777, 0o700)
  t.is((await stat(join(runDir, 'run.json'))).mode & 0o777, 0o600)
  t.is((await stat(join(runDir, 'puppet.log'))).mode & 0o777, 0o600)
  t.is((await stat(join(runDir, 'enc'))).mode & 0o777, 0o700)
  t.true(existsSync(join(runDir, 'last_run_summary.yaml')))
  t.false(existsSync(join(state, 'lock')), 'the lock is released')
})

test('puppet receives hostile parameter values byte for byte and no shell runs them', async (t) => {
  const dir = await tempDir(t)
  const out = join(dir, 'out')
  const weird = `it's "quoted" $(touch ${dir}/pwned) \`touch ${dir}/pwned2\`\nEOF\n---\n'\nünïcødé ✓ \\ %s`
  await writeTree(dir, {
    'modules/echo/trunk/echo/manifests/init.pp':
      'class echo (String $path) {\n  file { $path: content => "${::weird}|${::localpuppet_release}|${::localpuppet_run_id}|${::yes}|${::date}" }\n}\n',
  })
  const input = {app: 'echo/trunk', classes: {echo: {path: out}}, parameters: {weird, yes: 'yes', date: '2024-01-01'}}
  const result = await cli(['apply', '-', '--module-dir', join(dir, 'modules'), '--state-dir', join(dir, 'state'), '--', ...isolatePuppet(dir)], {
    input: JSON.stringify(input),
  })
  t.is(result.exitCode, 0, result.stderr)
  const {record} = await statusJson(join(dir, 'state'))
  t.is(await readFile(out, 'utf8'), `${weird}|echo/trunk|${record.id}|yes|2024-01-01`)
  t.false(existsSync(join(dir, 'pwned')))
  t.false(existsSync(join(dir, 'pwned2')))
})

test('an environment other than production applies', async (t) => {
  const dir = await tempDir(t)
  await writeTree(dir, {
    'input.yaml': 'app: foo/trunk\nenvironment: staging\nclasses: [foo, platform]\n',
  })
  const {result} = await applyDemo(t, [], join(dir, 'input.yaml'))
  t.is(result.exitCode, 0, result.stdout + result.stderr)
  t.regex(result.stdout, /in environment staging/)
  t.regex(result.stdout, /I notify you!/)
})

test('facts given with --fact reach puppet as facts', async (t) => {
  const dir = await tempDir(t)
  await writeTree(dir, {
    'modules/boot/trunk/boot/manifests/init.pp': 'class boot {\n  notify { "stage=${facts[\'lifecycle_stage\']}": }\n}\n',
    'input.yaml': 'app: boot/trunk\nclasses: [boot]\n',
  })
  const result = await cli([
    'apply', join(dir, 'input.yaml'), '--module-dir', join(dir, 'modules'), '--state-dir', join(dir, 'state'),
    '--fact', 'lifecycle_stage=bootstrap', '--', ...isolatePuppet(dir),
  ])
  t.is(result.exitCode, 0, result.stderr)
  t.regex(result.stdout, /Notice: stage=bootstrap/)
  const {record} = await statusJson(join(dir, 'state'))
  t.deepEqual(record.facts, {lifecycle_stage: 'bootstrap'})
})

test('a catalog that does not compile exits 1 and is recorded as failed with no stale summary', async (t) => {
  const dir = await tempDir(t)
  // A class that does not exist is refused before Puppet runs; a value of the wrong type only Puppet finds.
  await writeTree(dir, {'input.yaml': 'app: foo/trunk\nclasses:\n  foo:\n    port: eighty\n'})
  const {state, result} = await applyDemo(t, [], join(dir, 'input.yaml'))
  t.is(result.exitCode, 1)
  t.regex(result.stderr, /Class\[Foo\]: parameter 'port' expects an Integer value, got String/)
  const {exitCode, record} = await statusJson(state)
  t.is(exitCode, 1)
  t.is(record.state, 'failed')
  t.is(record.puppetExitCode, 1)
  t.is(record.resources, null)
  t.regex(record.error, /did not compile/)
})

test('--detailed-exitcodes passes puppet\'s codes through: 2 for changes, 4 for failures', async (t) => {
  const changes = await applyDemo(t, ['--detailed-exitcodes'])
  t.is(changes.result.exitCode, 2, changes.result.stderr)

  const dir = await tempDir(t)
  await writeTree(dir, {
    'modules/broken/trunk/broken/manifests/init.pp': "class broken {\n  exec { 'fail': command => '/bin/false' }\n}\n",
    'input.yaml': 'app: broken/trunk\nclasses: [broken]\n',
  })
  const run = (args: string[]) =>
    cli(['apply', join(dir, 'input.yaml'), '--module-dir', join(dir, 'modules'), '--state-dir', join(dir, 'state'), ...args, '--', ...isolatePuppet(dir)])
  const detailed = await run(['--detailed-exitcodes'])
  t.is(detailed.exitCode, 4, detailed.stderr)
  const plain = await run([])
  t.is(plain.exitCode, 1)
  const {record} = await statusJson(join(dir, 'state'))
  t.is(record.state, 'failed')
  t.is(record.resources.failed, 1)
})

test('a tagged release that depends on trunk is refused before anything runs, unless --allow-mutable', async (t) => {
  const dir = await tempDir(t)
  await writeTree(dir, {
    'modules/foo/tags/2.0.0/foo/manifests/init.pp': "class foo { notify { 'I notify you!': } }\n",
    'modules/foo/tags/2.0.0/manifest.yaml': 'modulepath:\n  - dist/trunk\n',
    'modules/dist/trunk/platform/manifests/init.pp': "class platform { notify { 'platform class': } }\n",
    'input.yaml': 'app: foo/tags/2.0.0\nclasses: [foo, platform]\n',
  })
  const base = ['apply', join(dir, 'input.yaml'), '--module-dir', join(dir, 'modules'), '--state-dir', join(dir, 'state')]
  const refused = await cli(base)
  t.is(refused.exitCode, 65)
  t.regex(refused.stderr, /foo\/tags\/2\.0\.0\/manifest\.yaml:2: modulepath\[0\]: "dist\/trunk" is mutable/)
  const {exitCode, record: refusedRecord} = await statusJson(join(dir, 'state'))
  t.is(exitCode, 1, 'the refusal is recorded: status says so')
  t.like(refusedRecord, {state: 'refused', exitCode: 65, release: null, ref: 'foo/tags/2.0.0'})

  const allowed = await cli([...base, '--allow-mutable', '--', ...isolatePuppet(dir)])
  t.is(allowed.exitCode, 0, allowed.stderr)
  const {record} = await statusJson(join(dir, 'state'))
  t.true(record.allowMutable)
  t.deepEqual(record.mutableEntries, ['dist/trunk'])
})

test('apply --json prints the run record and nothing else on stdout', async (t) => {
  const {result} = await applyDemo(t, ['--json'])
  t.is(result.exitCode, 0, result.stderr)
  const record = JSON.parse(result.stdout)
  t.is(record.state, 'succeeded')
  t.is(record.release, 'foo/tags/1.4.0')
  const log = await readFile(record.log, 'utf8')
  t.regex(log, /platform class/)
})

test('each run gets its own directory, and ids sort by start time', async (t) => {
  const dir = await tempDir(t)
  const state = join(dir, 'state')
  const args = ['apply', join(DEMO, 'input.yaml'), '--module-dir', join(DEMO, 'modules'), '--state-dir', state, '--', ...isolatePuppet(dir)]
  t.is((await cli(args)).exitCode, 0)
  t.is((await cli(args)).exitCode, 0)
  const runs = (await readdir(join(state, 'runs'))).sort()
  t.is(runs.length, 2)
  const {record} = await statusJson(state)
  t.is(record.id, runs[1])
  const first = await statusJson(state, runs[0])
  t.is(first.record.id, runs[0])
})

test('--noop changes nothing, and with --detailed-exitcodes exits 2 when resources are out of sync', async (t) => {
  const dir = await tempDir(t)
  const target = join(dir, 'drift')
  await writeTree(dir, {
    'modules/drift/trunk/drift/manifests/init.pp': 'class drift (String $path) {\n  file { $path: content => "wanted\\n" }\n}\n',
    'input.yaml': `app: drift/trunk\nclasses:\n  drift:\n    path: ${JSON.stringify(target)}\n`,
  })
  const state = join(dir, 'state')
  const result = await cli([
    'apply', join(dir, 'input.yaml'), '--module-dir', join(dir, 'modules'), '--state-dir', state, '--noop', '--detailed-exitcodes', '--', ...isolatePuppet(dir),
  ])
  t.is(result.exitCode, 2, result.stderr)
  t.false(existsSync(target), 'noop created nothing')
  t.regex(result.stderr, /succeeded drift\/trunk, 1 would change \(noop\), 0 failed/)
  const {record} = await statusJson(state)
  t.true(record.noop)
  t.is(record.puppetExitCode, 0, "puppet's own exit code says nothing changed")
  t.is(record.exitCode, 2)
  t.is(record.resources.outOfSync, 1)
  t.is(record.resources.changed, 0)
})

test('SIGTERM during a real run stops the exec resources puppet started in their own session', async (t) => {
  const dir = await tempDir(t)
  const pidFile = join(dir, 'sleeper.pid')
  await writeTree(dir, {
    'sleeper': {mode: 0o755, content: `#!/bin/sh\necho $$ > ${pidFile}\nexec sleep 300\n`},
    'modules/slow/trunk/slow/manifests/init.pp': "class slow (String $script) {\n  exec { 'sleeper': command => $script, timeout => 0 }\n}\n",
    'input.yaml': `app: slow/trunk\nclasses:\n  slow:\n    script: ${JSON.stringify(join(dir, 'sleeper'))}\n`,
  })
  const state = join(dir, 'state')
  const run = startCli(['apply', join(dir, 'input.yaml'), '--module-dir', join(dir, 'modules'), '--state-dir', state, '--', ...isolatePuppet(dir)])
  const until = Date.now() + 90_000
  while (!existsSync(pidFile) && Date.now() < until) await sleep(100)
  await sleep(100)
  const sleeper = Number(await readFile(pidFile, 'utf8'))
  run.kill('SIGTERM')
  const result = await run
  t.is(result.exitCode, 143)
  const deadline = Date.now() + 60_000
  let alive = true
  while (alive && Date.now() < deadline) {
    try {
      process.kill(sleeper, 0)
      await sleep(100)
    } catch {
      alive = false
    }
  }

  t.false(alive, 'the exec child is gone')
  const {record} = await statusJson(state)
  t.is(record.state, 'interrupted')
})
