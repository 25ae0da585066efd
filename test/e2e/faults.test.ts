import {execFileSync} from 'node:child_process'
import {existsSync, readdirSync} from 'node:fs'
import {cp, mkdir, mkdtemp, readFile, rm, symlink, truncate, writeFile} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'

import test, {type ExecutionContext} from 'ava'

import {FIXTURES, cli, isolatePuppet, startCli, statusJson} from '../helpers/cli.js'
import {tempDir, writeTree} from '../helpers/temp.js'

const DEMO = join(FIXTURES, 'demo')
const isRoot = process.geteuid?.() === 0
const asRoot = isRoot ? test : test.skip

/**
 * A puppet stand-in for faults: answers `config print`, then optionally fills the disk
 * ($FAKE_FILL) and prints a lot, sleeps $FAKE_SLEEP or waits for the file $FAKE_GO, writes the run summary where
 * --lastrunfile says ($FAKE_SUMMARY) and exits $FAKE_EXIT.
 */
const FAULT_PUPPET = `#!/bin/sh
if [ "$1" = config ]; then
  printf '{"agent_catalog_run_lockfile": "%s/catalog.lock", "agent_disabled_lockfile": "%s/disabled.lock"}\\n' "$FAKE_DIR" "$FAKE_DIR"
  exit 0
fi
summary=
while [ $# -gt 0 ]; do [ "$1" = --lastrunfile ] && summary=$2; shift; done
echo "Notice: applying"
echo $$ > "$FAKE_DIR/puppet.pid"
if [ -n "$FAKE_FILL" ]; then dd if=/dev/zero of="$FAKE_FILL" bs=4096 2>/dev/null; seq 1 20000; fi
sleep "\${FAKE_SLEEP:-0}"
# Or until the test says go: no timing to guess on a loaded machine.
if [ -n "$FAKE_GO" ]; then n=0; while [ ! -e "$FAKE_GO" ] && [ $n -lt 3000 ]; do sleep 0.1; n=$((n+1)); done; fi
if [ -n "$FAKE_SUMMARY" ]; then
  printf 'resources:\\n  changed: 1\\n  failed: 0\\n  out_of_sync: 1\\n  total: 5\\ntime:\\n  last_run: %s\\n' "$(date +%s)" > "$summary"
fi
exit "\${FAKE_EXIT:-0}"
`

async function setup(t: ExecutionContext, stateDir?: string) {
  const dir = await tempDir(t)
  const fake = join(dir, 'fake')
  await mkdir(fake)
  const puppet = join(dir, 'puppet')
  await writeFile(puppet, FAULT_PUPPET, {mode: 0o755})
  const modules = join(dir, 'modules')
  await cp(join(DEMO, 'modules'), modules, {recursive: true})
  const state = stateDir ?? join(dir, 'state')
  const args = ['apply', join(DEMO, 'input.yaml'), '--module-dir', modules, '--state-dir', state, '--puppet', puppet]
  return {dir, fake, puppet, modules, state, args, env: {FAKE_DIR: fake}}
}

/** A small tmpfs, unmounted when the test ends. */
async function smallFilesystem(t: ExecutionContext, size: string): Promise<string> {
  const mount = await mkdtemp(join(tmpdir(), 'localpuppet-tmpfs-'))
  execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size},mode=0755`, 'tmpfs', mount])
  t.teardown(async () => {
    execFileSync('umount', ['-l', mount])
    await rm(mount, {recursive: true, force: true})
  })
  return mount
}

/** Every file under dir, relative. */
function filesUnder(dir: string): string[] {
  return readdirSync(dir, {recursive: true, encoding: 'utf8'})
}

asRoot('a state dir on a full disk: apply exits 74, leaves no lock or temp files and no running record', async (t) => {
  const mount = await smallFilesystem(t, '256k')
  const state = join(mount, 'state')
  const {args, env} = await setup(t, state)
  await mkdir(join(state, 'runs'), {recursive: true, mode: 0o700})
  try {
    execFileSync('dd', ['if=/dev/zero', `of=${join(mount, 'fill')}`, 'bs=4096'], {stdio: 'ignore'})
  } catch {}

  const result = await cli(args, {env})
  t.is(result.exitCode, 74, result.stderr)
  t.regex(result.stderr, /no space left on the device/)
  t.deepEqual(filesUnder(state).filter((name) => /lock|tmp/.test(name)), [], 'no lock debris')
  const history = await cli(['history', '--state-dir', state, '--json'])
  t.false(JSON.parse(history.stdout).some((record: {state: string}) => record.state === 'running'))
})

asRoot('the disk fills while puppet applies: exit 74, the record is final (not running) with puppet’s exit, no debris', async (t) => {
  const mount = await smallFilesystem(t, '512k')
  const state = join(mount, 'state')
  const {args, env} = await setup(t, state)
  const result = await cli([...args, '--json'], {env: {...env, FAKE_FILL: join(mount, 'fill')}})
  t.is(result.exitCode, 74, result.stderr)
  await rm(join(mount, 'fill'))
  const {exitCode, record} = await statusJson(state)
  t.is(exitCode, 1)
  t.is(record.state, 'error')
  t.is(record.exitCode, 74)
  t.is(record.puppetExitCode, 0)
  t.regex(record.error, /no space left on the device.*; puppet exited 0/)
  t.deepEqual(filesUnder(state).filter((name) => /lock|\.tmp$/.test(name)), [])
})

test('a damaged run.json (garbage, null, {}, huge) is 65 naming the file; history skips it with a warning', async (t) => {
  const {state, args, env} = await setup(t)
  const good = JSON.parse((await cli([...args, '--json'], {env})).stdout)
  const damaged: Record<string, (path: string) => Promise<void>> = {
    '20200101T000000.001Z-0001': (path) => writeFile(path, 'garbage{'),
    '20200101T000000.002Z-0002': (path) => writeFile(path, 'null'),
    '20200101T000000.003Z-0003': (path) => writeFile(path, '{}'),
    '20200101T000000.004Z-0004': async (path) => {
      await writeFile(path, '')
      await truncate(path, 600 * 1024 * 1024)
    },
  }
  for (const [id, make] of Object.entries(damaged)) {
    await mkdir(join(state, 'runs', id), {recursive: true})
    await make(join(state, 'runs', id, 'run.json'))
    const status = await cli(['status', id, '--state-dir', state])
    t.is(status.exitCode, 65, `${id}: ${status.stderr}`)
    t.true(status.stderr.startsWith(`localpuppet: run record ${join(state, 'runs', id, 'run.json')}: `), status.stderr)
    t.false(status.stdout.includes('undefined'))
  }

  const history = await cli(['history', '--state-dir', state, '--json'])
  t.is(history.exitCode, 0, history.stderr)
  t.deepEqual(JSON.parse(history.stdout).map((record: {id: string}) => record.id), [good.id])
  t.is(history.stderr.split('\n').filter((line) => line.startsWith('localpuppet: warning: skipped: run record ')).length, 4)
})

test('kill -9 of apply mid-run: status says running while the orphaned puppet lives, then takes its result from the run summary', async (t) => {
  const {state, fake, args, env} = await setup(t)
  const go = join(fake, 'go')
  const run = startCli(args, {env: {...env, FAKE_GO: go, FAKE_SUMMARY: '1'}})
  let record: any
  for (let i = 0; i < 600 && !record?.puppetPid; i++) {
    await sleep(100)
    record = await statusJson(state).then((status) => status.record, () => undefined)
  }

  t.truthy(record?.puppetPid, 'the record names puppet once it runs')
  process.kill(run.pid!, 'SIGKILL')
  await run
  const during = await statusJson(state)
  t.is(during.record.state, 'running', 'puppet still applies')
  t.is(during.exitCode, 75)
  await writeFile(go, '')
  const puppetPid = Number(await readFile(join(fake, 'puppet.pid'), 'utf8'))
  while (existsSync(`/proc/${puppetPid}`) && !(await readFile(`/proc/${puppetPid}/stat`, 'utf8').catch(() => '')).includes(') Z')) await sleep(100)
  const after = await statusJson(state)
  t.is(after.record.state, 'succeeded')
  t.is(after.exitCode, 0)
  t.like(after.record.resources, {changed: 1, failed: 0, outOfSync: 1, total: 5})
  t.regex(after.record.error, /result is taken from puppet's summary/)
})

test('install refuses (73) to replace a trunk a run is using, and installs it once the run is done', async (t) => {
  const {dir, modules, state, puppet, env} = await setup(t)
  await writeTree(dir, {'trunk.yaml': 'app: foo/trunk\n'})
  const archive = join(dir, 'trunk.tar.gz')
  const packed = await cli(['pack', 'foo/trunk', '--module-dir', modules, '--allow-mutable', '-o', archive])
  t.is(packed.exitCode, 0, packed.stderr)
  const go = join(env.FAKE_DIR, 'go')
  const run = startCli(['apply', join(dir, 'trunk.yaml'), '--module-dir', modules, '--state-dir', state, '--puppet', puppet], {env: {...env, FAKE_GO: go}})
  while (!existsSync(join(env.FAKE_DIR, 'puppet.pid'))) await sleep(100)
  const during = await cli(['install', archive, '--module-dir', modules])
  t.is(during.exitCode, 73, during.stderr)
  t.regex(during.stderr, /(?:foo|dist)\/trunk is in use by run \S+ \(pid \d+\); nothing was installed/)
  await writeFile(go, '')
  t.is((await run).exitCode, 0)
  const after = await cli(['install', archive, '--module-dir', modules])
  t.is(after.exitCode, 0, after.stderr)
})

test('a release holding a symlink: plan, validate and apply all refuse it alike (65), naming the link; apply records only its refusal', async (t) => {
  const {dir, modules, state, args, env} = await setup(t)
  await symlink('init.pp', join(modules, 'foo', 'trunk', 'foo', 'manifests', 'link.pp'))
  await writeTree(dir, {'trunk.yaml': 'app: foo/trunk\n'})
  const input = join(dir, 'trunk.yaml')
  const expected = /foo\/trunk\/foo\/manifests\/link\.pp: a symbolic link; a release may hold only regular files and directories/
  const plan = await cli(['plan', input, '--module-dir', modules, '--state-dir', state])
  t.is(plan.exitCode, 65)
  t.regex(plan.stderr, expected)
  const validate = await cli(['validate', input, '--module-dir', modules, '--puppet', 'none'])
  t.is(validate.exitCode, 65)
  t.regex(validate.stdout + validate.stderr, expected)
  const apply = await cli(['apply', input, ...args.slice(2)], {env})
  t.is(apply.exitCode, 65)
  t.regex(apply.stderr, expected)
  // Every attempt leaves a trace (issue 9): the refusal, and nothing that ran.
  const runs = existsSync(join(state, 'runs')) ? readdirSync(join(state, 'runs')) : []
  t.is(runs.length, 1)
  t.is(JSON.parse(await readFile(join(state, 'runs', runs[0], 'run.json'), 'utf8')).state, 'refused')
})

test('a state dir whose path has a space works with real puppet, and Puppet’s report store does not grow', async (t) => {
  const dir = await tempDir(t)
  const state = join(dir, 'state dir')
  const result = await cli(['apply', join(DEMO, 'input.yaml'), '--module-dir', join(DEMO, 'modules'), '--state-dir', state, '--json', '--', ...isolatePuppet(dir)])
  t.is(result.exitCode, 0, result.stderr)
  const record = JSON.parse(result.stdout)
  t.is(record.state, 'succeeded')
  t.true(existsSync(join(state, 'runs', record.id, 'last_run_report.yaml')), "the run's own report is kept")
  const reports = join(dir, 'puppet', 'var', 'reports')
  t.false(existsSync(reports) && filesUnder(reports).some((name) => name.endsWith('.yaml')), 'nothing in Puppet’s reportdir')
})

test('--reports in the arguments for puppet is the user asking for reports: localpuppet then leaves them alone', async (t) => {
  const dir = await tempDir(t)
  const plan = await cli(['plan', join(DEMO, 'input.yaml'), '--module-dir', join(DEMO, 'modules'), '--state-dir', join(dir, 's'), '--json', '--', '--reports', 'store'])
  const command: string[] = JSON.parse(plan.stdout).command
  t.is(command.filter((arg) => arg === '--reports').length, 1)
  const quiet = JSON.parse((await cli(['plan', join(DEMO, 'input.yaml'), '--module-dir', join(DEMO, 'modules'), '--state-dir', join(dir, 's'), '--json'])).stdout).command as string[]
  t.is(quiet[quiet.indexOf('--reports') + 1], 'none')
})

/** foo/tags/1.0.0 holding `megabytes` MiB of random bytes, in a module dir of a fresh temp dir. */
async function incompressibleRelease(t: ExecutionContext, megabytes: number): Promise<{dir: string; modules: string}> {
  const dir = await tempDir(t)
  const modules = join(dir, 'modules')
  const tree: Record<string, string> = {'foo/tags/1.0.0/manifest.yaml': 'modulepath: []\n'}
  for (let i = 0; i < megabytes; i++) tree[`foo/tags/1.0.0/foo/files/blob${i}`] = execFileSync('head', ['-c', String(1024 * 1024), '/dev/urandom']).toString('latin1')
  await writeTree(modules, tree)
  return {dir, modules}
}

asRoot('pack onto a full disk: 74 naming the output, and neither the archive nor its spool or temp file is left', async (t) => {
  // 4 MB that does not compress: more than the 1 MB file system holds.
  const {modules} = await incompressibleRelease(t, 4)
  const full = await smallFilesystem(t, '1m')
  const result = await cli(['pack', 'foo@1.0.0', '--module-dir', modules, '-o', join(full, 'foo.tar.gz')])
  t.is(result.exitCode, 74, result.stderr)
  t.regex(result.stderr, new RegExp(`output ${full}/foo\\.tar\\.gz`))
  t.deepEqual(filesUnder(full), [])
})

test('pack -o - to a reader that goes away: 74, not a bug; stopped while blocked on its reader: no spool left', async (t) => {
  // 2 MB that does not compress: more than a pipe holds.
  const {dir, modules} = await incompressibleRelease(t, 2)
  const tmp = join(dir, 'tmp')
  await mkdir(tmp)
  const bin = join(FIXTURES, '..', 'bin', 'run.js')
  const env = {...process.env, TMPDIR: tmp}
  const status = execFileSync('bash', ['-c', 'node "$1" pack foo@1.0.0 --module-dir "$2" -o - 2>"$3" | head -c 10 >/dev/null; echo "${PIPESTATUS[0]}"', '--', bin, modules, join(dir, 'err')], {encoding: 'utf8', env})
  const err = await readFile(join(dir, 'err'), 'utf8')
  t.is(status.trim(), '74', err)
  t.is(err.trim(), 'localpuppet: standard output: closed by the reader')

  // Nobody reads: pack blocks with its spool open, and is stopped there.
  const {spawn} = await import('node:child_process')
  const blocked = spawn('node', [bin, 'pack', 'foo@1.0.0', '--module-dir', modules, '-o', '-'], {env, stdio: ['ignore', 'pipe', 'ignore']})
  await sleep(1500)
  blocked.kill('SIGINT')
  const [, signal] = (await new Promise((resolve) => blocked.once('exit', (...args) => resolve(args)))) as [number | null, string | null]
  t.is(signal, 'SIGINT')
  t.deepEqual(readdirSync(tmp), [])
})

test('a state dir that cannot be one (a file, a path through a file, links that loop) is 65 naming it, for apply, status, history and disable', async (t) => {
  const dir = await tempDir(t)
  await writeFile(join(dir, 'file'), '')
  await symlink('loop2', join(dir, 'loop1'))
  await symlink('loop1', join(dir, 'loop2'))
  const env = {FAKE_PUPPET_DIR: dir, FAKE_PUPPET_SLEEP: '0'}
  const cases: Array<[string, RegExp]> = [
    [join(dir, 'file'), /: not a directory$/],
    [join(dir, 'file', 'state'), /: a file is on its path, where a directory should be$/],
    [join(dir, 'loop1'), /: too many levels of symbolic links$/],
  ]
  for (const [state, message] of cases) {
    for (const command of [['apply', join(FIXTURES, 'demo', 'input.yaml'), '--module-dir', join(FIXTURES, 'demo', 'modules'), '--puppet', join(FIXTURES, 'fake-puppet', 'puppet')], ['status'], ['history'], ['disable', '--puppet', join(FIXTURES, 'fake-puppet', 'puppet')]]) {
      const result = await cli([...command, '--state-dir', state], {env})
      t.is(result.exitCode, 65, `${command[0]} ${state}: ${result.stderr}`)
      t.regex(result.stderr.split('\n')[0], new RegExp(`^localpuppet: state directory ${state}${message.source}`))
    }
  }
})
