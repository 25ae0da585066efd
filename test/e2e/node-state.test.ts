import {existsSync} from 'node:fs'
import {appendFile, chmod, mkdir, readFile, rm, writeFile} from 'node:fs/promises'
import {join} from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'

import test from 'ava'

import {FAKE_PUPPET, FIXTURES, cli, isolatePuppet, startCli, statusJson} from '../helpers/cli.js'
import {tempDir, writeTree} from '../helpers/temp.js'
import {testNeeding} from '../helpers/packages.js'

const jqTest = await testNeeding(['jq'])

const DEMO = join(FIXTURES, 'demo')

/** The demo's tags installed (with records) into a module dir of the test's own, and a fake puppet. */
async function setup(t: Parameters<typeof tempDir>[0], input = 'app: foo/tags/1.4.0\nclasses: [foo, platform]\n') {
  const dir = await tempDir(t)
  const modules = join(dir, 'modules')
  await mkdir(modules)
  for (const tag of ['1.3.0', '1.4.0']) {
    const archive = join(dir, `foo-${tag}.tar.gz`)
    t.is((await cli(['pack', `foo/tags/${tag}`, '--module-dir', join(DEMO, 'modules'), '-o', archive])).exitCode, 0)
    t.is((await cli(['install', archive, '--module-dir', modules])).exitCode, 0)
  }

  const fake = join(dir, 'fake')
  await mkdir(fake)
  await writeFile(join(dir, 'input.yaml'), input)
  const state = join(dir, 'state')
  const common = ['--module-dir', modules, '--state-dir', state, '--puppet', FAKE_PUPPET]
  const env = {FAKE_PUPPET_DIR: fake, FAKE_PUPPET_SLEEP: '0'}
  const apply = async (...extra: string[]) => cli(['apply', join(dir, 'input.yaml'), ...common, ...extra], {env})
  const history = async () => JSON.parse((await cli(['history', '--state-dir', state, '--json'])).stdout) as Array<Record<string, any>>
  return {dir, modules, fake, state, common, env, apply, history}
}

test('refused attempts of every kind are recorded; status exits 1 and names the last completed run', async (t) => {
  const {dir, modules, fake, state, apply, history} = await setup(t)
  t.is((await apply()).exitCode, 0)
  const good = (await statusJson(state)).record

  // Each kind of refusal: its exit code, and status tells it, never the older success.
  await writeFile(join(dir, 'bad.yaml'), 'app: foo/tags/1.4.0\nclases: [foo]\n')
  const cases: Array<[string, () => Promise<{exitCode: number}>, number, RegExp]> = [
    ['invalid input', async () => cli(['apply', join(dir, 'bad.yaml'), '--module-dir', modules, '--state-dir', state, '--puppet', FAKE_PUPPET]), 65, /unknown key "clases"/],
    ['release missing', async () => apply('--app', 'foo/tags/9.9.9'), 66, /foo\/tags\/9\.9\.9/],
    ['puppet missing', async () => cli(['apply', join(dir, 'input.yaml'), '--module-dir', modules, '--state-dir', state, '--puppet', join(dir, 'nope')]), 69, /puppet not found/],
    // (A release not installed: with one, --fetch falls back to it.)
    ['fetch failure', async () => apply('--fetch', '--source', join(dir, 'no-repository'), '--app', 'foo/tags/1.5.0'), 69, /no release repository at .*no-repository.*nothing installed here to fall back on/],
    ['puppet disabled', async () => {
      await writeFile(join(fake, 'agent_disabled.lock'), JSON.stringify({disabled_message: 'kernel upgrade (ops)'}))
      const result = await apply()
      await writeFile(join(fake, 'agent_disabled.lock'), '').then(() => import('node:fs/promises')).then((fs) => fs.unlink(join(fake, 'agent_disabled.lock')))
      return result
    }, 73, /puppet is disabled: kernel upgrade \(ops\)/],
  ]
  for (const [what, attempt, code, message] of cases) {
    const result = await attempt()
    t.is(result.exitCode, code, what)
    const status = await cli(['status', '--state-dir', state, '--input', join(dir, 'input.yaml')])
    t.is(status.exitCode, 1, `${what}: status fails the node`)
    t.regex(status.stdout, /state\s+refused/, what)
    t.regex(status.stdout, message, what)
    t.regex(status.stdout, new RegExp(`last completed\\s+${good.id.replaceAll('.', '\\.')}: succeeded foo/tags/1\\.4\\.0`), what)
    const {record} = await statusJson(state)
    t.like(record, {state: 'refused', exitCode: code, lastCompleted: {id: good.id, state: 'succeeded'}}, what)
    t.regex(record.error, message, what)
  }

  // Tampering with an installed tag: a verification failure.
  const file = join(modules, 'foo/tags/1.4.0/foo/manifests/init.pp')
  await chmod(file, 0o644)
  await appendFile(file, '# changed\n')
  t.is((await apply()).exitCode, 65)
  t.like((await statusJson(state)).record, {state: 'refused', exitCode: 65, error: 'foo/tags/1.4.0/foo/manifests/init.pp: modified since install'})
  t.deepEqual((await history()).map((r) => r.state), ['refused', 'refused', 'refused', 'refused', 'refused', 'refused', 'succeeded'])
})

test('busy is not failed: an attempt during a run, with or without --splay, leaves status on the run in progress, then on its result', async (t) => {
  const {fake, state, env, common, dir, apply, history} = await setup(t)
  // Long enough to outlast a loaded machine; stopped below.
  const first = startCli(['apply', join(dir, 'input.yaml'), ...common], {env: {...env, FAKE_PUPPET_SLEEP: '300'}})
  const until = Date.now() + 60_000
  while (!existsSync(join(fake, 'puppet.pid')) && Date.now() < until) await sleep(50)
  const running = (await statusJson(state)).record
  t.is(running.state, 'running')

  t.is((await apply()).exitCode, 73)
  t.is((await apply('--splay', '1')).exitCode, 73)
  t.is((await apply('--detach')).exitCode, 73)
  const during = await statusJson(state)
  t.is(during.exitCode, 75)
  t.is(during.record.id, running.id, 'the run in progress, not a busy attempt')

  first.kill('SIGTERM')
  t.is((await first).exitCode, 143)
  const after = await statusJson(state)
  t.is(after.record.id, running.id, 'its result, not a busy attempt that ended after it')
  t.is(after.record.state, 'interrupted')
  const states = (await history()).map((r) => r.state).sort()
  t.deepEqual(states, ['busy', 'busy', 'busy', 'interrupted'])
})

test('--app applies another release for one run; with --save the input names it from now on, byte for byte otherwise', async (t) => {
  const original = [
    '# The node input (ops, 2026-11-01)',
    'app: "foo/tags/1.3.0"   # pinned: see TICKET-42',
    '',
    'classes:   [foo, platform]',
    'parameters:',
    "  note: 'kept as is'   # a comment",
    '  mask: 0o755',
    '  ports: [80,443]',
    '',
  ].join('\n')
  const {dir, state, apply} = await setup(t, original)
  const once = await apply('--app', 'foo/tags/1.4.0', '--json')
  t.is(once.exitCode, 0, once.stderr)
  t.is(JSON.parse(once.stdout).release, 'foo/tags/1.4.0')
  t.is(await readFile(join(dir, 'input.yaml'), 'utf8'), original, '--app alone leaves the input as it is')
  t.is(JSON.parse((await apply('--json')).stdout).release, 'foo/tags/1.3.0', 'the next run goes back to the input')

  const saved = await apply('--app', 'foo@^1.4', '--save', '--json')
  t.is(saved.exitCode, 0, saved.stderr)
  t.is(JSON.parse(saved.stdout).saved, join(dir, 'input.yaml'))
  t.is(await readFile(join(dir, 'input.yaml'), 'utf8'), original.replace('"foo/tags/1.3.0"', '"foo/tags/1.4.0"'))
  t.is(JSON.parse((await apply('--json')).stdout).release, 'foo/tags/1.4.0', 'the next (timer) run stays on it')
  t.is((await statusJson(state)).record.pointer, null, 'status reads the default input unless told')
  const status = JSON.parse((await cli(['status', '--state-dir', state, '--input', join(dir, 'input.yaml'), '--json'])).stdout)
  t.is(status.pointer, 'foo/tags/1.4.0')

  // A refused attempt never moves the pointer; --save with stdin is a usage error.
  t.is((await apply('--app', 'foo/tags/9.9.9', '--save')).exitCode, 66)
  t.regex(await readFile(join(dir, 'input.yaml'), 'utf8'), /app: "foo\/tags\/1\.4\.0"/)
  const stdin = await cli(['apply', '-', '--save', '--app', 'foo/tags/1.3.0', '--state-dir', state], {input: original})
  t.is(stdin.exitCode, 64)
  t.regex(stdin.stderr, /--save rewrites the input file; it cannot with standard input/)
})

test('--save refuses an input it cannot write, before anything runs', async (t) => {
  if (process.getuid?.() === 0) {
    t.pass('root can write anything: nothing to refuse')
    return
  }

  const {dir, apply} = await setup(t)
  await chmod(dir, 0o555)
  t.teardown(() => chmod(dir, 0o755))
  const result = await apply('--app', 'foo/tags/1.3.0', '--save')
  t.is(result.exitCode, 74)
  t.regex(result.stderr, /--save: cannot rewrite .*input\.yaml/)
})

test('--save moves the pointer only once the run succeeded: a failed, timed-out or detached failing run leaves the input byte for byte', async (t) => {
  const original = '# node\napp: foo/tags/1.3.0   # pinned\nclasses: [foo, platform]\n'
  const {dir, fake, state, apply, history} = await setup(t, original)
  const input = join(dir, 'input.yaml')

  // Puppet fails (exit 4: failures): nothing saved, and it says so in the record, the log and on stderr.
  const failed = await cli(['apply', input, '--module-dir', join(dir, 'modules'), '--state-dir', state, '--puppet', FAKE_PUPPET, '--app', 'foo/tags/1.4.0', '--save'], {env: {FAKE_PUPPET_DIR: fake, FAKE_PUPPET_SLEEP: '0', FAKE_PUPPET_EXIT: '4'}})
  t.is(failed.exitCode, 1, failed.stderr)
  t.is(await readFile(input, 'utf8'), original)
  t.regex(failed.stderr, new RegExp(`--save: ${input.replaceAll('/', '\\/')} was left as it was \\(the run failed\\)`))
  const record = (await history())[0]
  t.like(record, {state: 'failed', saved: null})
  t.regex(await readFile(record.log, 'utf8'), /--save: the run failed: the input was left as it was/)

  // Timed out (interrupted, 75): the same.
  const timedOut = await cli(['apply', input, '--module-dir', join(dir, 'modules'), '--state-dir', state, '--puppet', FAKE_PUPPET, '--app', 'foo/tags/1.4.0', '--save', '--timeout', '1'], {env: {FAKE_PUPPET_DIR: fake, FAKE_PUPPET_SLEEP: '30'}})
  t.is(timedOut.exitCode, 75, timedOut.stderr)
  t.is(await readFile(input, 'utf8'), original)
  t.like((await history())[0], {state: 'interrupted', saved: null})

  // --detach: the background half saves nothing for a run that fails.
  const detached = await cli(['apply', input, '--module-dir', join(dir, 'modules'), '--state-dir', state, '--puppet', FAKE_PUPPET, '--app', 'foo/tags/1.4.0', '--save', '--detach'], {env: {FAKE_PUPPET_DIR: fake, FAKE_PUPPET_SLEEP: '0', FAKE_PUPPET_EXIT: '1'}})
  t.is(detached.exitCode, 0, detached.stderr)
  const waited = await cli(['status', detached.stdout.trim(), '--wait', '--timeout', '60', '--state-dir', state, '--json'])
  t.like(JSON.parse(waited.stdout), {state: 'failed', saved: null})
  t.is(await readFile(input, 'utf8'), original)

  // The run that succeeds moves it, and only the value's bytes change.
  const good = await apply('--app', 'foo/tags/1.4.0', '--save', '--json')
  t.is(good.exitCode, 0, good.stderr)
  t.is(JSON.parse(good.stdout).saved, input)
  t.is(await readFile(input, 'utf8'), original.replace('1.3.0', '1.4.0'))
})

test('--save refuses, before Puppet runs, an input whose app it could not rewrite (a merge key)', async (t) => {
  const original = 'base: &base\n  app: foo/tags/1.3.0\n<<: *base\nclasses: [foo]\n'
  const {dir, fake, apply} = await setup(t, original)
  const plain = await apply('--json')
  // The input itself is fine without --save (skip when this build reads no merge keys there).
  if (plain.exitCode !== 0) return t.pass(`merge keys in input.yaml are refused by this build: ${plain.stderr}`)
  await rm(join(fake, 'args'))
  const refused = await apply('--app', 'foo/tags/1.4.0', '--save')
  t.is(refused.exitCode, 65, refused.stderr)
  t.regex(refused.stderr, /--save needs a top-level "app: REF"/)
  t.false(existsSync(join(fake, 'args')), 'puppet never ran')
  t.is(await readFile(join(dir, 'input.yaml'), 'utf8'), original)
})

test('--save with --noop is a usage error (64) for apply and rollback, naming both flags; nothing is recorded', async (t) => {
  const {dir, modules, state, env, apply, history} = await setup(t)
  const input = join(dir, 'input.yaml')
  const before = await readFile(input, 'utf8')
  const applied = await apply('--app', 'foo/tags/1.3.0', '--save', '--noop')
  t.is(applied.exitCode, 64, applied.stderr)
  t.regex(applied.stderr, /--save with --noop/)
  t.is(await readFile(input, 'utf8'), before)
  t.is(existsSync(join(state, 'runs')) ? (await history()).length : 0, 0, 'nothing recorded')
  const first = await cli(['rollback', input, '--module-dir', modules, '--state-dir', state, '--puppet', FAKE_PUPPET, '--noop', '--save'], {env})
  t.is(first.exitCode, 64, 'usage first, before looking for a run to roll back to (66)')

  // rollback: with a run to roll back to, the same refusal (--json: the error object).
  t.is((await apply('--app', 'foo/tags/1.3.0')).exitCode, 0)
  t.is((await apply()).exitCode, 0)
  const rollback = await cli(['rollback', input, '--module-dir', modules, '--state-dir', state, '--puppet', FAKE_PUPPET, '--save', '--noop', '--json'], {env})
  t.is(rollback.exitCode, 64, rollback.stderr)
  t.like(JSON.parse(rollback.stdout).error, {code: 'usage', exitCode: 64})
  t.regex(JSON.parse(rollback.stdout).error.message, /--save with --noop/)
  t.is(await readFile(input, 'utf8'), before)
  t.is((await history()).length, 2)
})

test('rollback without --save says on stderr that the input still names the newer release; with --save it does not', async (t) => {
  const {dir, modules, state, env, apply} = await setup(t)
  const input = join(dir, 'input.yaml')
  t.is((await apply('--app', 'foo/tags/1.3.0')).exitCode, 0)
  t.is((await apply()).exitCode, 0)
  const rollback = async (...extra: string[]) => cli(['rollback', input, '--module-dir', modules, '--state-dir', state, '--puppet', FAKE_PUPPET, ...extra], {env})
  const warned = `${input} still names foo/tags/1.4.0: the next run without --app applies that again; rollback --save makes foo/tags/1.3.0 the node's release`
  const plain = await rollback()
  t.is(plain.exitCode, 0, plain.stderr)
  t.true(plain.stderr.split('\n').includes(`localpuppet: warning: ${warned}`), plain.stderr)

  // --json: the line is on stderr, never in the record printed.
  t.is((await apply()).exitCode, 0)
  const json = await rollback('--json')
  t.is(json.exitCode, 0, json.stderr)
  t.true(json.stderr.includes(warned), json.stderr)
  t.is(JSON.parse(json.stdout).release, 'foo/tags/1.3.0')

  t.is((await apply()).exitCode, 0)
  const saved = await rollback('--save')
  t.is(saved.exitCode, 0, saved.stderr)
  t.false(saved.stderr.includes('still names'), saved.stderr)
  t.regex(await readFile(input, 'utf8'), /^app: foo\/tags\/1\.3\.0$/m)
})

test('replay applies exactly what a run applied, after a newer release; refused when a tag on it was tampered; rollback picks it', async (t) => {
  const {dir, modules, state, apply, history} = await setup(t, 'app: foo/tags/1.3.0\nclasses:\n  foo:\n    port: 8080\n  platform:\n')
  const first = JSON.parse((await apply('--fact', 'role=web', '--json', '--', '--verbose')).stdout)
  t.is(first.state, 'succeeded')
  await writeFile(join(dir, 'input.yaml'), 'app: foo/tags/1.4.0\nclasses: [foo]\nparameters:\n  tier: gold\n')
  t.is(JSON.parse((await apply('--json')).stdout).release, 'foo/tags/1.4.0')

  const replayed = await apply('--replay', first.id, '--json')
  t.is(replayed.exitCode, 0, replayed.stderr)
  const again = JSON.parse(replayed.stdout)
  t.like(again, {release: 'foo/tags/1.3.0', replayOf: first.id, facts: {role: 'web'}, puppetArgs: ['--verbose'], modulepath: first.modulepath})
  const enc = async (id: string) => (await readFile(join(state, 'runs', id, 'enc.yaml'), 'utf8')).replace(id, 'ID')
  t.is(await enc(again.id), await enc(first.id), 'the same ENC document')

  // rollback: from the current release (1.3.0, just replayed) to the newest success of another: 1.4.0.
  const rolled = await cli(['rollback', join(dir, 'input.yaml'), ...['--module-dir', modules, '--state-dir', state, '--puppet', FAKE_PUPPET], '--save'], {env: {FAKE_PUPPET_DIR: join(dir, 'fake'), FAKE_PUPPET_SLEEP: '0'}})
  t.is(rolled.exitCode, 0, rolled.stderr)
  t.regex(rolled.stderr, /rolling back from foo\/tags\/1\.3\.0 to foo\/tags\/1\.4\.0: replaying run /)
  t.is((await statusJson(state)).record.release, 'foo/tags/1.4.0')
  t.is(await readFile(join(dir, 'input.yaml'), 'utf8'), 'app: foo/tags/1.4.0\nclasses: [foo]\nparameters:\n  tier: gold\n')

  // The dependency tag of 1.3.0 is tampered with: its replay is refused, naming the file.
  const file = join(modules, 'dist/tags/2.0.1/platform/manifests/init.pp')
  await chmod(file, 0o644)
  await appendFile(file, "notify { 'injected': }\n")
  const refused = await apply('--replay', first.id)
  t.is(refused.exitCode, 65)
  t.regex(refused.stderr, /dist\/tags\/2\.0\.1\/platform\/manifests\/init\.pp: modified since install/)
  t.like((await history())[0], {state: 'refused', replayOf: first.id})
})

test('replay of a run on trunk needs --allow-mutable, recorded', async (t) => {
  const dir = await tempDir(t)
  await writeTree(dir, {'modules/web/trunk/web/manifests/init.pp': 'class web {}\n', 'input.yaml': 'app: web/trunk\nclasses: [web]\n', 'fake/.keep': ''})
  const common = ['--module-dir', join(dir, 'modules'), '--state-dir', join(dir, 'state'), '--puppet', FAKE_PUPPET]
  const env = {FAKE_PUPPET_DIR: join(dir, 'fake'), FAKE_PUPPET_SLEEP: '0'}
  const first = JSON.parse((await cli(['apply', join(dir, 'input.yaml'), ...common, '--json'], {env})).stdout)
  const refused = await cli(['apply', '--replay', first.id, ...common], {env})
  t.is(refused.exitCode, 65)
  t.regex(refused.stderr, /web\/trunk is mutable/)
  const allowed = await cli(['apply', '--replay', first.id, ...common, '--allow-mutable', '--json'], {env})
  t.is(allowed.exitCode, 0, allowed.stderr)
  t.like(JSON.parse(allowed.stdout), {allowMutable: true, mutableEntries: ['web/trunk'], replayOf: first.id})
})

test('--if-changed corrects drift: a file changed by hand is put back once the compared run is older than --max-age', async (t) => {
  const dir = await tempDir(t)
  const target = join(dir, 'managed.txt')
  await writeTree(dir, {
    'modules/web/trunk/web/manifests/init.pp': `class web { file { '${target}': content => "managed\\n" } }\n`,
    'input.yaml': 'app: web/trunk\nclasses: [web]\n',
  })
  const args = ['apply', join(dir, 'input.yaml'), '--module-dir', join(dir, 'modules'), '--state-dir', join(dir, 'state'), '--if-changed', '--json']
  const run = async (...extra: string[]) => JSON.parse((await cli([...args, ...extra, '--', ...isolatePuppet(dir)])).stdout)
  t.is((await run()).state, 'succeeded')
  t.is(await readFile(target, 'utf8'), 'managed\n')
  await writeFile(target, 'changed by hand\n')
  const skipped = await run()
  t.is(skipped.state, 'skipped', 'younger than the default --max-age')
  t.regex(skipped.reason, /nothing changed since run \S+, \d+s ago .*--max-age 6h/)
  await sleep(2000)
  const enforced = await run('--max-age', '1s')
  t.is(enforced.state, 'succeeded')
  t.is(await readFile(target, 'utf8'), 'managed\n', 'the drift is corrected')
  t.is((await cli([...args, '--max-age', 'soon'])).exitCode, 64)
})

jqTest('--on-finish reads the record from /dev/stdin, and a hook that leaves a process behind does not hold apply', async (t) => {
  const {dir, apply} = await setup(t)
  const out = join(dir, 'hook-state')
  const result = await apply('--on-finish', `jq -r .state /dev/stdin > ${out}; setsid sleep 1000 & sleep 1000 &`)
  t.is(result.exitCode, 0, result.stderr)
  t.is(await readFile(out, 'utf8'), 'succeeded\n')
  // A refused attempt runs the hook too.
  const refused = await apply('--app', 'foo/tags/9.9.9', '--on-finish', `jq -r '.state + " " + (.exitCode|tostring)' /dev/stdin > ${out}`)
  t.is(refused.exitCode, 66)
  t.is(await readFile(out, 'utf8'), 'refused 66\n')
})

test("--on-finish: a hook that allocates past the 1 GiB bound is stopped; the run stays succeeded and the hook's failure is in the log", async (t) => {
  const {apply, state} = await setup(t)
  const result = await apply('--on-finish', `awk 'BEGIN { s = "x"; while (length(s) < 1536 * 1024 * 1024) s = s s; print "allocated" }'`)
  t.is(result.exitCode, 0, result.stderr)
  const {exitCode, record} = await statusJson(state)
  t.is(exitCode, 0)
  t.is(record.state, 'succeeded')
  const log = await readFile(record.log, 'utf8')
  t.regex(log, /on-finish hook failed \(exit \d+\)/)
  t.regex(log, /on-finish: awk: .*out of memory/)
  t.notRegex(log, /^on-finish: allocated/m)
})
