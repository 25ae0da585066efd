// Issue 26, the hostile campaign: what apply writes or replays as root, attacked by an
// unprivileged user (useradd): `--save` on an input that is a link or a hard link into
// another user's file, `--replay` of a run whose directory another user changed, and
// `--metrics-file` in a directory another user owns.
import {existsSync} from 'node:fs'
import {chmod, chown, cp, link, mkdir, readFile, stat, symlink, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import test, {type ExecutionContext} from 'ava'

import {FAKE_PUPPET, FIXTURES, cli} from '../helpers/cli.js'
import {asHostile, hostileUid} from '../helpers/hostile-user.js'
import {tempDir} from '../helpers/temp.js'

const uid = hostileUid()
const asRoot = uid === null ? test.skip : test
const DEMO = join(FIXTURES, 'demo')

async function setup(t: ExecutionContext) {
  const dir = await tempDir(t)
  await chmod(dir, 0o755)
  const modules = join(dir, 'modules')
  await cp(join(DEMO, 'modules'), modules, {recursive: true})
  const fake = join(dir, 'fake')
  await mkdir(fake)
  const state = join(dir, 'state')
  const theirs = join(dir, 'theirs')
  await mkdir(theirs, {mode: 0o755})
  await chown(theirs, uid!, uid!)
  const env = {FAKE_PUPPET_DIR: fake, FAKE_PUPPET_SLEEP: '0'}
  const apply = (input: string, ...extra: string[]) => cli(['apply', input, '--module-dir', modules, '--state-dir', state, '--puppet', FAKE_PUPPET, ...extra], {env})
  return {dir, modules, state, fake, theirs, apply}
}

asRoot('apply --save on an input that is a link or a hard link into another user\'s file: refused (77) before Puppet runs, their file unchanged', async (t) => {
  const {dir, theirs, fake, apply} = await setup(t)
  const text = (await readFile(join(DEMO, 'input.yaml'), 'utf8')).replace('foo@^1.4', 'foo/tags/1.3.0')
  // Their file, written by them.
  const owned = join(theirs, 'node.yaml')
  await writeFile(join(dir, 'text.yaml'), text, {mode: 0o644})
  asHostile(`cp ${join(dir, 'text.yaml')} ${owned}`)

  const symbolic = join(dir, 'symlink.yaml')
  await symlink(owned, symbolic)
  const viaLink = await apply(symbolic, '--save', '--app', 'foo/tags/1.4.0')
  t.is(viaLink.exitCode, 77, viaLink.stderr)
  t.regex(viaLink.stderr.split('\n')[0], /^localpuppet: input file('s parent directory)? .* is not trusted: owned by uid \d+/)

  // A hard link (an operator's mistake, or a system without protected_hardlinks): the same inode, their file.
  const hard = join(dir, 'hard.yaml')
  await link(owned, hard)
  const viaHardLink = await apply(hard, '--save', '--app', 'foo/tags/1.4.0')
  t.is(viaHardLink.exitCode, 77, viaHardLink.stderr)
  t.regex(viaHardLink.stderr.split('\n')[0], new RegExp(`^localpuppet: input file ${hard} is not trusted: owned by uid ${uid}`))
  t.is(await readFile(owned, 'utf8'), text, 'their file is unchanged')
  t.is((await stat(owned)).uid, uid!)
  t.false(existsSync(join(fake, 'args')), 'puppet never ran')

  // A root-owned file hard-linked into their directory (they cannot do it; root might): --save replaces
  // the input's name with a new file and never writes through the other name.
  const rootFile = join(dir, 'root.yaml')
  await writeFile(rootFile, text)
  const second = join(theirs, 'second-name.yaml')
  await link(rootFile, second)
  const saved = await apply(rootFile, '--save', '--app', 'foo/tags/1.4.0')
  t.is(saved.exitCode, 0, saved.stderr)
  t.regex(await readFile(rootFile, 'utf8'), /^app: foo\/tags\/1\.4\.0$/m)
  t.is(await readFile(second, 'utf8'), text, 'the other name (their directory) still holds the old bytes: the rewrite is a new file')
})

asRoot('apply --replay of a run whose directory or record another user changed is refused (77) before Puppet runs', async (t) => {
  const {dir, fake, apply, state} = await setup(t)
  const input = join(dir, 'input.yaml')
  await writeFile(input, await readFile(join(DEMO, 'input.yaml')))
  const first = await apply(input, '--json')
  t.is(first.exitCode, 0, first.stderr)
  const {id} = JSON.parse(first.stdout)
  const runDir = join(state, 'runs', id)
  const record = join(runDir, 'run.json')
  // Readable by others (still trusted: owned by root, written by root alone), so the attacker can reach the run.
  await chmod(state, 0o755)
  await chmod(join(state, 'runs'), 0o755)

  // Their directory: they can put any record there.
  await chown(runDir, uid!, uid!)
  // The record is root's 0600, but the directory is theirs: they replace it with one of their own.
  const forged = join(dir, 'forged.json')
  await writeFile(forged, (await readFile(record, 'utf8')).replace(/"port": *8080/, '"port": "8080; exec evil"'), {mode: 0o644})
  asHostile(`rm -f ${record} && cp ${forged} ${record}`)
  t.regex(await readFile(record, 'utf8'), /exec evil/, 'the attack worked')
  const owned = await apply(input, '--replay', id)
  t.is(owned.exitCode, 77, owned.stderr)
  t.regex(owned.stderr.split('\n')[0], new RegExp(`^localpuppet: run ${id}'s directory ${runDir} is not trusted: owned by uid ${uid}`))
  await chown(runDir, 0, 0)
  await chown(record, 0, 0)

  // A record others can write, in root's directory.
  await chmod(record, 0o666)
  const writable = await apply(input, '--replay', id)
  t.is(writable.exitCode, 77, writable.stderr)
  t.regex(writable.stderr.split('\n')[0], new RegExp(`^localpuppet: run ${id}'s record ${record} is not trusted: writable by group and others`))
  // rollback replays the same way.
  const rollback = await cli(['rollback', input, '--module-dir', join(dir, 'modules'), '--state-dir', state, '--puppet', FAKE_PUPPET, '--to', 'foo/tags/1.4.0'], {env: {FAKE_PUPPET_DIR: fake, FAKE_PUPPET_SLEEP: '0'}})
  t.is(rollback.exitCode, 77, rollback.stderr)
  t.regex(rollback.stderr.split('\n')[0], /record .* is not trusted: writable by group and others/)
  const args = await readFile(join(fake, 'args'), 'utf8')
  t.notRegex(args, /evil/, 'the forged parameter never reached Puppet')
  t.notRegex(await readFile(join(fake, 'enc.yaml'), 'utf8').catch(() => ''), /evil/)
})

asRoot('--metrics-file in a directory another user owns is refused (77) before Puppet runs; they cannot redirect root\'s write', async (t) => {
  const {dir, state, theirs, fake, apply} = await setup(t)
  const input = join(dir, 'input.yaml')
  await writeFile(input, await readFile(join(DEMO, 'input.yaml')))
  const metrics = join(theirs, 'node.prom')
  const result = await apply(input, '--metrics-file', metrics)
  t.is(result.exitCode, 77, result.stderr)
  t.regex(result.stderr.split('\n')[0], new RegExp(`^localpuppet: metrics file's directory ${theirs} is not trusted: owned by uid ${uid}`))
  t.false(existsSync(join(fake, 'args')), 'puppet never ran')
  t.false(existsSync(metrics))

  // The attack it stops: the directory swapped for a link to one root writes into (here a stand-in for /etc/cron.d).
  const target = join(dir, 'cron.d')
  await mkdir(target)
  asHostile(`mkdir ${theirs}/real && mv ${theirs}/real ${theirs}/gone && ln -s ${target} ${theirs}/m`)
  const swapped = await apply(input, '--metrics-file', join(theirs, 'm', 'node.prom'))
  t.is(swapped.exitCode, 77, swapped.stderr)
  t.false(existsSync(join(target, 'node.prom')), 'nothing written where the link leads')
  // --allow-untrusted writes it anyway, with a warning, and records it.
  const allowed = await apply(input, '--metrics-file', metrics, '--allow-untrusted', '--json')
  t.is(allowed.exitCode, 0, allowed.stderr)
  t.true(JSON.parse(allowed.stdout).untrusted.some((line: string) => line.startsWith(`metrics file's directory ${theirs} is not trusted`)), 'recorded')
  t.true(existsSync(metrics))

  // disable rewrites the metrics file too: refused the same way, before Puppet's lock is written.
  const disabled = await cli(['disable', 'x', '--state-dir', state, '--puppet', FAKE_PUPPET, '--metrics-file', join(theirs, 'm', 'disabled.prom')], {env: {FAKE_PUPPET_DIR: fake}})
  t.is(disabled.exitCode, 77, disabled.stderr)
  t.regex(disabled.stderr.split('\n')[0], new RegExp(`^localpuppet: metrics file's directory('s parent directory)? ${theirs}(/m)? is not trusted`))
  t.false(existsSync(join(fake, 'agent_disabled.lock')), 'not disabled')
  t.false(existsSync(join(target, 'disabled.prom')))
})

test('a path or argument holding an escape sequence, a newline or a bidi override is shown escaped on one line in any refusal, not sent to the terminal', async (t) => {
  const odd = 'x\u001B[2J\u202Ey\nlocalpuppet: forged'
  for (const [args, exitCode] of [
    [['apply', `/nonexistent/${odd}.yaml`, '--module-dir', '/nonexistent'], 66],
    [['fetch', 'foo/tags/1.0.0', '--source', `/nonexistent/${odd}`, '--module-dir', '/nonexistent'], 69],
    [['log', odd], 64],
  ] as const) {
    const result = await cli([...args])
    t.is(result.exitCode, exitCode, result.stderr)
    const [first, ...rest] = result.stderr.trimEnd().split('\n')
    t.true(first.startsWith('localpuppet: '), result.stderr)
    t.true(rest.every((line) => line.startsWith('  hint: ')), result.stderr)
    t.false(/[\u001B\u202E]/.test(result.stderr), result.stderr)
  }
})
