import {existsSync} from 'node:fs'
import {readFile, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import test from 'ava'

import {FAKE_PUPPET, FIXTURES, cli} from '../helpers/cli.js'
import {readManual} from '../helpers/manual.js'
import {tempDir, writeTree} from '../helpers/temp.js'

const DEMO = join(FIXTURES, 'demo')

test('plan prints the release, real modulepath, ENC document and command, and creates nothing', async (t) => {
  const dir = await tempDir(t)
  const state = join(dir, 'state')
  const result = await cli(['plan', join(DEMO, 'input.yaml'), '--module-dir', join(DEMO, 'modules'), '--state-dir', state])
  t.is(result.exitCode, 0, result.stderr)
  t.regex(result.stdout, /release\s+foo\/tags\/1\.4\.0\s+\(from foo@\^1\.4\)/)
  t.regex(result.stdout, /dist\/tags\/2\.0\.1/)
  t.regex(result.stdout, /localpuppet_release: foo\/tags\/1\.4\.0/)
  t.regex(result.stdout, /apply --detailed-exitcodes --node_terminus exec --external_nodes/)
  t.false(existsSync(state), 'plan writes no state')
})

test('plan --json gives release, modulepath, enc and command', async (t) => {
  const dir = await tempDir(t)
  const result = await cli(['plan', join(DEMO, 'input.yaml'), '--module-dir', join(DEMO, 'modules'), '--state-dir', join(dir, 's'), '--json', '--', '--debug'])
  t.is(result.exitCode, 0, result.stderr)
  const plan = JSON.parse(result.stdout)
  t.is(plan.release, 'foo/tags/1.4.0')
  t.is(plan.ref, 'foo@^1.4')
  t.deepEqual(plan.modulepath, [join(DEMO, 'modules/foo/tags/1.4.0'), join(DEMO, 'modules/dist/tags/2.0.1')])
  t.deepEqual(plan.enc.classes, {foo: {port: 8080}, platform: null})
  t.is(plan.enc.parameters.localpuppet_release, 'foo/tags/1.4.0')
  t.is(plan.enc.parameters.localpuppet_run_id, '<run-id>')
  t.is(plan.command[1], 'apply')
  t.is(plan.command.at(-2), '--debug')
  t.true(plan.command.includes(plan.modulepath.join(':')))
})

test('bad input is one line naming the file and key, exit 65; plan writes nothing, apply records the refusal', async (t) => {
  const dir = await tempDir(t)
  await writeTree(dir, {'input.yaml': 'app: foo/trunk\nclases:\n  - foo\n'})
  const state = join(dir, 'state')
  for (const command of ['plan', 'apply']) {
    const result = await cli([command, join(dir, 'input.yaml'), '--module-dir', join(DEMO, 'modules'), '--state-dir', state])
    t.is(result.exitCode, 65)
    t.is(result.stderr, `localpuppet: ${join(dir, 'input.yaml')}:2: unknown key "clases" (did you mean classes?); allowed: app, layers, classes, parameters, environment, remove`)
    t.is(result.stdout, '')
    if (command === 'plan') t.false(existsSync(state))
  }

  const status = await cli(['status', '--state-dir', state, '--json'])
  t.is(status.exitCode, 1)
  t.like(JSON.parse(status.stdout), {state: 'refused', exitCode: 65, release: null})
})

test('a class the release does not provide: plan and apply refuse it (65) in validate\'s words before Puppet runs; apply records the refusal', async (t) => {
  const dir = await tempDir(t)
  // foo@^1.4 provides foo and platform (dist); site.pp, the main manifest, defines mysite.
  await writeTree(dir, {'input.yaml': 'app: foo@^1.4\nclasses:\n  fooo:\n  platform:\n  mysite:\n', 'site.pp': 'class mysite {}\n'})
  const state = join(dir, 'state')
  const line = `localpuppet: ${join(dir, 'input.yaml')}: release foo/tags/1.4.0: class fooo is not defined on the modulepath (Puppet looks in fooo/manifests/init.pp); did you mean foo?`
  for (const command of ['plan', 'apply']) {
    const result = await cli([command, join(dir, 'input.yaml'), '--module-dir', join(DEMO, 'modules'), '--state-dir', state, '--manifest', join(dir, 'site.pp'), '--puppet', FAKE_PUPPET], {env: {FAKE_PUPPET_DIR: dir}})
    t.is(result.exitCode, 65, result.stderr)
    t.is(result.stderr.split('\n')[0], line)
    t.is(result.stdout, '')
  }

  t.false(existsSync(join(dir, 'args')), 'puppet never ran')
  const status = await cli(['status', '--state-dir', state, '--json'])
  t.like(JSON.parse(status.stdout), {state: 'refused', exitCode: 65, error: line.slice('localpuppet: '.length)})

  // Classes of the modulepath and of the main manifest are found.
  await writeTree(dir, {'input.yaml': 'app: foo@^1.4\nclasses:\n  - foo\n  - platform\n  - mysite\n'})
  const found = await cli(['plan', join(dir, 'input.yaml'), '--module-dir', join(DEMO, 'modules'), '--state-dir', state, '--manifest', join(dir, 'site.pp')])
  t.is(found.exitCode, 0, found.stderr)
})

test('a YAML syntax error names the line; --json gives an error object', async (t) => {
  const dir = await tempDir(t)
  await writeTree(dir, {'input.yaml': 'app: foo/trunk\nclasses:\n  - foo\n bad: [\n'})
  const result = await cli(['plan', join(dir, 'input.yaml'), '--module-dir', join(DEMO, 'modules'), '--json'])
  t.is(result.exitCode, 65)
  const {error} = JSON.parse(result.stdout)
  t.is(error.code, 'invalid-input')
  t.is(error.exitCode, 65)
  t.regex(error.message, /input\.yaml:4:\d+: /)
})

test('missing input file, module dir or release is 66', async (t) => {
  const dir = await tempDir(t)
  await writeTree(dir, {'input.yaml': 'app: foo/tags/9.9.9\n', 'range.yaml': 'app: foo@^7\n'})
  const missingInput = await cli(['plan', join(dir, 'nope.yaml'), '--module-dir', join(DEMO, 'modules')])
  t.is(missingInput.exitCode, 66)
  t.regex(missingInput.stderr, /input file .*nope\.yaml: not found/)

  const missingModules = await cli(['plan', join(dir, 'input.yaml'), '--module-dir', join(dir, 'nomodules')])
  t.is(missingModules.exitCode, 66)
  t.regex(missingModules.stderr, /module directory .*nomodules: not found/)

  const missingRelease = await cli(['plan', join(dir, 'input.yaml'), '--module-dir', join(DEMO, 'modules')])
  t.is(missingRelease.exitCode, 66)
  t.regex(missingRelease.stderr, /foo\/tags\/9\.9\.9 not found/)
  t.regex(missingRelease.stderr, /hint: foo has tags: 1\.4\.0, 1\.3\.0/)

  const noMatch = await cli(['plan', join(dir, 'range.yaml'), '--module-dir', join(DEMO, 'modules')])
  t.is(noMatch.exitCode, 66)
  t.regex(noMatch.stderr, /no tag of foo satisfies "\^7"/)
})

test('usage errors exit 64', async (t) => {
  const unknownFlag = await cli(['plan', '--no-such-flag'])
  t.is(unknownFlag.exitCode, 64)
  const badFact = await cli(['plan', join(DEMO, 'input.yaml'), '--module-dir', join(DEMO, 'modules'), '--fact', 'no-equals'])
  t.is(badFact.exitCode, 64)
  t.regex(badFact.stderr, /--fact "no-equals": expected NAME=VALUE/)
  const badRunId = await cli(['status', '../../etc'])
  t.is(badRunId.exitCode, 64)
  const badTimeout = await cli(['apply', '--timeout', '10m'])
  t.is(badTimeout.exitCode, 64)
  t.is(badTimeout.stderr, 'localpuppet: --timeout: Expected an integer but received: 10m\n  hint: see --help')
  const unknownCommand = await cli(['aply'])
  t.is(unknownCommand.exitCode, 64)
  t.is(unknownCommand.stderr, 'localpuppet: unknown command "aply" (did you mean apply?); see localpuppet --help')
})

test('status and log with no runs yet exit 66', async (t) => {
  const dir = await tempDir(t)
  const status = await cli(['status', '--state-dir', dir])
  t.is(status.exitCode, 66)
  t.regex(status.stderr, /no runs yet/)
  const log = await cli(['log', '--state-dir', dir])
  t.is(log.exitCode, 66)
  const missing = await cli(['status', '20261122T091631.123Z-4f2a', '--state-dir', dir, '--json'])
  t.is(missing.exitCode, 66)
  t.is(JSON.parse(missing.stdout).error.code, 'not-found')
})

test('--help shows the exit-code table', async (t) => {
  const help = await cli(['apply', '--help'])
  t.is(help.exitCode, 0)
  t.regex(help.stdout, /EXIT CODES/)
  t.regex(help.stdout, /73\s+another run holds the lock/)
})

test('localpuppet help [COMMAND] shows help and exits 0; an unknown one is 64 with a did-you-mean', async (t) => {
  const root = await cli(['help'])
  t.is(root.exitCode, 0, root.stderr)
  t.regex(root.stdout, /^USAGE\n {2}\$ localpuppet \[COMMAND\]$/m)
  t.regex(root.stdout, /^ {2}apply /m)
  const apply = await cli(['help', 'apply'])
  t.is(apply.exitCode, 0, apply.stderr)
  t.is(apply.stdout, (await cli(['apply', '--help'])).stdout)
  const typo = await cli(['help', 'aply'])
  t.is(typo.exitCode, 64)
  t.is(typo.stderr, 'localpuppet: unknown command "aply" (did you mean apply?); see localpuppet --help')
})

test('help of a topic (fleet, rollout) and of a command in one (fleet status, rollout list) is their --help; a typo in one is named with spaces, as typed', async (t) => {
  for (const words of [['fleet'], ['fleet', 'status'], ['rollout'], ['rollout', 'list']]) {
    const help = await cli(['help', ...words])
    t.is(help.exitCode, 0, `help ${words.join(' ')}: ${help.stderr}`)
    t.is(help.stdout, (await cli([...words, '--help'])).stdout, `help ${words.join(' ')}`)
  }

  t.regex((await cli(['help', 'fleet'])).stdout, /^ {2}fleet status {2}/m)
  for (const args of [['fleet', 'stat'], ['help', 'fleet', 'stat']]) {
    const typo = await cli(args)
    t.is(typo.exitCode, 64, args.join(' '))
    t.is(typo.stderr, 'localpuppet: unknown command "fleet stat" (did you mean fleet status?); see localpuppet --help')
  }

  t.is((await cli(['help', 'flet'])).stderr, 'localpuppet: unknown command "flet" (did you mean fleet?); see localpuppet --help')
})

test("promote's and fleet status's usage in --help is their heading in the manual, and fleet status describes its own -t and --allow-untrusted", async (t) => {
  const readme = await readManual()
  for (const words of [['promote'], ['fleet', 'status']]) {
    const help = (await cli([...words, '--help'], {env: {OCLIF_COLUMNS: '80'}})).stdout
    const usage = help.split('USAGE\n')[1].split('\n\n')[0].replace(/\s+/g, ' ').trim().replace(/^\$ /, '')
    t.regex(readme, new RegExp(`^#{2,3} \`${usage.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\``, 'm'), `a heading for ${usage}`)
  }

  const fleet = (await cli(['fleet', 'status', '--help'], {env: {OCLIF_COLUMNS: '400'}})).stdout
  t.regex(fleet, /^ {2}-t, --reply-timeout=SECONDS +seconds each node has to answer the status request \(mco -t\) \[default: 20\]$/m)
  t.regex(fleet, /^ {6}--allow-untrusted +use a rollouts directory \(where --via mco remembers the fleet\)/m)
  t.notRegex(fleet, /120 with --fetch|apply records it/)
})

test('fleet status -t is how long mco waits for each node to answer the status request (default 20 s)', async (t) => {
  const dir = await tempDir(t)
  const mco = join(dir, 'mco')
  await writeFile(mco, `#!/bin/sh\nprintf '%s\\n' "$@" > ${dir}/args\necho '[]'\n`, {mode: 0o755})
  const timeout = async (...extra: string[]) => {
    const status = await cli(['fleet', 'status', '--mco', mco, '--state-dir', join(dir, 'state'), ...extra])
    t.is(status.exitCode, 1, status.stderr)
    const args = (await readFile(join(dir, 'args'), 'utf8')).split('\n')
    return args[args.indexOf('-t') + 1]
  }

  t.is(await timeout('-t', '45'), '45')
  t.is(await timeout(), '20')
})

test("a flag given without one it needs, with one it excludes, or a required flag left out is one line naming them (64), whatever the command", async (t) => {
  const cases: Array<[string[], string]> = [
    [['apply', '--max-age', '1h'], '--max-age needs --if-changed'],
    [['validate', '--facts', 'facts.yaml'], '--facts needs --compile'],
    [['publish', '--node', 'web1', '--repo', 'repo'], '--node needs --input'],
    [['publish', '--inputs', 'nodes', '--node', 'web1', '--input', 'web1.yaml', '--repo', 'repo'], '--inputs and --node cannot be used together'],
    [['status', '--check', '--wait'], '--check and --wait cannot be used together'],
    [['promote', 'foo/tags/1.0.0'], '--channel and --repo are required'],
  ]
  for (const [args, message] of cases) {
    const result = await cli(args)
    t.is(result.exitCode, 64, args.join(' '))
    t.is(result.stderr, `localpuppet: ${message}`)
  }

  // Other parser messages keep their hint, without oclif's double colon.
  const noArg = await cli(['promote'])
  t.is(noArg.exitCode, 64)
  t.regex(noArg.stderr, /^localpuppet: Missing 1 required arg: release +the tag the channel will name: APP\/tags\/TAG\n {2}hint: see --help$/)
})

test('an unknown flag gets a did-you-mean among the command\'s own flags (64)', async (t) => {
  const result = await cli(['apply', '--noopp'])
  t.is(result.exitCode, 64)
  t.is(result.stderr.split('\n')[0], 'localpuppet: Nonexistent flag: --noopp (did you mean --noop?)')
  const two = await cli(['plan', '--modul-dir', 'x', '--zzzzzz'])
  t.is(two.stderr.split('\n')[0], 'localpuppet: Nonexistent flags: --modul-dir (did you mean --module-dir?), --zzzzzz')
  const json = await cli(['fetch', 'foo@^1', '--sorce', 'x', '--json'])
  t.is(JSON.parse(json.stdout).error.message, 'Nonexistent flag: --sorce (did you mean --source?)')
})

test('the exit-code table in --help keeps its columns at 80 columns: a long meaning continues under the meaning', async (t) => {
  for (const command of ['apply', 'fetch', 'install', 'status']) {
    const help = await cli([command, '--help'], {env: {OCLIF_COLUMNS: '80'}})
    const table = help.stdout.split('EXIT CODES\n')[1].split('\n\n')[0].split('\n')
    const hang = /^ {2}\S+ +/.exec(table[0])![0].length
    t.true(table.length > 3, command)
    for (const line of table) {
      t.true(line.length <= 80, `${command}: ${line}`)
      t.regex(line, new RegExp(`^ {2}\\S+ +\\S|^ {${hang}}\\S`), `${command}: every line is a row or a continuation under its meaning`)
      t.is(/^ {2}\S+ +/.exec(line)?.[0].length ?? hang, hang, `${command}: one column for the meanings`)
    }
  }

  const apply = await cli(['apply', '--help'], {env: {OCLIF_COLUMNS: '80'}})
  t.regex(apply.stdout, /^ {2}65 {9}invalid input or release \(YAML, schema, mutable, path\); --fetch:\n {13}bad signature or digest, a replayed \(older\), expired or substituted\n {13}\(another repository's\) repository index, a node input that does not\n {13}match the index; an encrypted input not for this node's key, or\n {13}tampered$/m)
})
