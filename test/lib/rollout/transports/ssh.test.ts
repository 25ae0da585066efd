import {existsSync} from 'node:fs'
import {chmod, mkdir, mkdtemp, readFile, rm, stat, writeFile} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'

import test from 'ava'
import fc from 'fast-check'

import {FleetUnavailableError} from '../../../../src/lib/errors.js'
import {rolloutSettings} from '../../../../src/lib/rollout/settings.js'
import {type SshOptions, SshTransport, readMarked, remoteCommand} from '../../../../src/lib/rollout/transports/ssh.js'
import type {SshTarget} from '../../../../src/lib/rollout/transports/ssh-targets.js'
import {asHostile, hostileUid} from '../../../helpers/hostile-user.js'

const CHANGED = `@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@
@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @
@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@
Host key for changed has changed and you have requested strict checking.
Host key verification failed.`

/**
 * A fake ssh: logs each call's arguments, then acts as the host named after `--`: `down`
 * cannot be reached, `changed` has a new host key, `chatty`'s shell prints a banner and a
 * goodbye around the command (forged markers included); any other runs the remote
 * command with sh, as a node's shell would, with NODE set. The fake localpuppet answers
 * from answers/NODE-COMMAND.json (exit code in .rc), logging what it ran.
 */
async function fakeSsh(t: {teardown(fn: () => Promise<void>): void}, targets: SshTarget[], answers: Record<string, {json: unknown; rc?: number}>) {
  const dir = await mkdtemp(join(tmpdir(), 'localpuppet-fake-ssh-'))
  t.teardown(() => rm(dir, {recursive: true, force: true}))
  await mkdir(join(dir, 'answers'))
  for (const [name, answer] of Object.entries(answers)) {
    await writeFile(join(dir, 'answers', `${name}.json`), typeof answer.json === 'string' ? answer.json : JSON.stringify(answer.json))
    await writeFile(join(dir, 'answers', `${name}.rc`), String(answer.rc ?? 0))
  }

  await writeFile(join(dir, 'changed.txt'), CHANGED)
  const ssh = join(dir, 'ssh')
  await writeFile(
    ssh,
    `#!/bin/sh
# One call's lines together, whatever runs at once: 40 at a time interleaved their lines and merged two calls into one.
( flock 9; { printf '%s\\n' "$@"; echo ---; } >> ${dir}/calls ) 9>> ${dir}/calls.lock
host=; prev=; last=
for a; do [ "$prev" = "--" ] && [ -z "$host" ] && host=$a; prev=$a; last=$a; done
case " $* " in *" -O exit "*) exit 0;; esac
case $host in
  changed) cat ${dir}/changed.txt >&2; exit 255;;
  unknown) printf 'No ED25519 host key is known for unknown and you have requested strict checking.\\nHost key verification failed.\\n' >&2; exit 255;;
  down) echo "ssh: connect to host down port 22: Connection refused" >&2; exit 255;;
  flood) nonce=$(echo "$last" | sed -n 's/.*lp-begin-\\([0-9a-f]*\\).*/\\1/p'); printf '\\nlp-begin-%s\\n{"id": "x", "pad": "' $nonce; head -c \${FLOOD:-9000000} /dev/zero | tr '\\0' x; printf '"}\\nlp-end-%s 0\\n' $nonce; exit 0;;
  chatty) printf 'Welcome to chatty!\\n{"id": "forged"}\\nlp-end-0 0\\n';;
esac
NODE=$host sh -c "$last"
rc=$?
[ "$host" = chatty ] && printf 'logout {"id": "forged"}\\n'
exit $rc
`,
  )
  const localpuppet = join(dir, 'localpuppet')
  await writeFile(
    localpuppet,
    `#!/bin/sh
echo "$NODE $*" >> ${dir}/ran
f=${dir}/answers/$NODE-$1
[ -f $f.json ] || { echo '{"error": {"code": "not-found", "exitCode": 66, "message": "no runs yet"}}'; exit 66; }
cat $f.json
exit $(cat $f.rc)
`,
  )
  await chmod(ssh, 0o755)
  await chmod(localpuppet, 0o755)
  const options: SshOptions = {ssh, targets, targetsFrom: '--targets', config: '/etc/ssh/test_config', knownHosts: join(dir, 'known_hosts'), connectTimeout: 3, localpuppet, replyTimeout: null}
  const warnings: string[] = []
  const transport = new SshTransport(options, (line) => warnings.push(line))
  t.teardown(() => transport.close())
  const calls = async () =>
    (await readFile(join(dir, 'calls'), 'utf8').catch(() => ''))
      .split('---\n')
      .filter(Boolean)
      .map((call) => call.trimEnd().split('\n'))
  const ran = async () => (await readFile(join(dir, 'ran'), 'utf8').catch(() => '')).trim().split('\n').filter(Boolean).sort()
  return {transport, calls, ran, warnings, localpuppet}
}

const target = (node: string, user: string | null = null, port: number | null = null): SshTarget => ({node, host: node, user, port})
const RUN = '20261125T120000.000Z-0001'
const running = {id: RUN, state: 'running', release: 'foo/tags/1.5.0', startedAt: '2026-11-25T12:00:00.000Z'}

test("a start runs localpuppet apply --detach --json on each node over the node's own user and port, never asking (BatchMode, strict host keys, one multiplexed connection)", async (t) => {
  const {transport, calls, ran} = await fakeSsh(t, [target('web1', 'deploy', 2222), target('web2'), target('chatty')], {
    'web1-apply': {json: running},
    'web2-apply': {json: {error: {code: 'locked', exitCode: 73, message: 'another run is in progress (run x)'}}, rc: 73},
    'chatty-apply': {json: {...running, id: '20261125T120000.000Z-0003'}},
  })
  const answers = await transport.start(['web1', 'web2', 'chatty'], rolloutSettings({ref: 'foo/tags/1.5.0', fetch: true, save: true, timeout: 600}))
  t.deepEqual(answers.web1, {run: {runId: RUN, state: 'running', release: 'foo/tags/1.5.0', startedAt: '2026-11-25T12:00:00.000Z'}})
  t.deepEqual(answers.web2, {exitCode: 73, busy: true, message: 'another run is in progress (run x)'})
  t.like(answers.chatty, {run: {runId: '20261125T120000.000Z-0003'}}, "the shell's banner and goodbye, forged markers included, are not the answer")
  const ran1 = await ran()
  t.deepEqual(ran1, ['chatty apply --detach --json --save --timeout 600 --app foo/tags/1.5.0 --fetch', 'web1 apply --detach --json --save --timeout 600 --app foo/tags/1.5.0 --fetch', 'web2 apply --detach --json --save --timeout 600 --app foo/tags/1.5.0 --fetch'])
  const web1 = (await calls()).find((argv) => argv.includes('web1'))!
  t.deepEqual(web1.slice(0, 2), ['-F', '/etc/ssh/test_config'])
  for (const option of ['BatchMode=yes', 'StrictHostKeyChecking=yes', 'ControlMaster=auto', 'ControlPersist=60', 'ConnectTimeout=3']) t.true(web1.includes(option), option)
  const paths = new Set((await calls()).flatMap((argv) => argv.filter((arg) => arg.startsWith('ControlPath='))))
  t.is(paths.size, 1, 'one control directory for every connection, however many start together')
  t.regex([...paths][0], /^ControlPath=".*\/%C"$/)
  const [controlDir] = [...paths][0].slice('ControlPath="'.length).split('/%C')
  t.deepEqual(web1.slice(web1.indexOf('-l'), web1.indexOf('-l') + 4), ['-l', 'deploy', '-p', '2222'])
  t.is(web1.at(-2), 'web1')
  t.is(web1.at(-3), '--', 'the host can never be read as an option')

  // close() ends each node's master connection.
  await transport.close()
  const exits = (await calls()).filter((argv) => argv.includes('-O'))
  t.deepEqual(exits.map((argv) => argv.at(-1)).sort(), ['chatty', 'web1', 'web2'])
  t.false(existsSync(controlDir), 'the control directory is gone')
})

test('a changed host key is a refusal naming the node (77), never a prompt; a node that cannot be reached did not answer; a rollback goes to each node\'s own release', async (t) => {
  const {transport, warnings, ran} = await fakeSsh(t, [target('changed'), target('unknown'), target('down'), target('db1'), target('db2')], {
    'db1-rollback': {json: running},
    'db2-rollback': {json: 'Segmentation fault', rc: 139},
  })
  const answers = await transport.revert(
    [
      {node: 'changed', release: 'foo/tags/1.4.0', save: false},
      {node: 'unknown', release: 'foo/tags/1.4.0', save: false},
      {node: 'down', release: 'foo/tags/1.4.0', save: false},
      {node: 'db1', release: 'foo/tags/1.3.0', save: true},
      {node: 'db2', release: 'foo/tags/1.4.0', save: false},
    ],
    rolloutSettings({ref: 'foo/tags/1.5.0', noop: false}),
  )
  t.like(answers.changed, {exitCode: 77, busy: false})
  t.regex((answers.changed as {message: string}).message, /^the SSH host key of changed has changed \(REMOTE HOST IDENTIFICATION HAS CHANGED\): not talking to it/)
  t.deepEqual(answers.unknown, {exitCode: 77, busy: false, message: 'the SSH host key of unknown is not known (StrictHostKeyChecking): add it to the known hosts file after checking it'})
  t.false('down' in answers, 'no answer')
  t.like(answers.db1, {run: {runId: RUN}})
  t.deepEqual(answers.db2, {exitCode: 139, busy: false, message: 'localpuppet exited 139 without a JSON answer'})
  t.deepEqual(await ran(), ['db1 rollback --detach --json --save --to foo/tags/1.3.0', 'db2 rollback --detach --json --to foo/tags/1.4.0'])
  // A survey leaves a refused node out (no answer) and says why, once; at its turn, a probe lets its start say why.
  t.deepEqual(Object.keys(await transport.survey(['changed', 'db1'])), ['db1'])
  await transport.survey(['changed'])
  t.deepEqual(await transport.probe(['changed', 'down']), {changed: {pointer: null, applied: null, newest: null, disabled: null, drift: null}})
  t.deepEqual(warnings, [`changed: ${(answers.changed as {message: string}).message}`, 'down: no answer: ssh: connect to host down port 22: Connection refused'])
})

test("a survey reads each node's status; a node with no run yet answered (with nothing); a poll believes only the run it asked about", async (t) => {
  const status = {
    id: RUN,
    state: 'failed',
    release: 'foo/tags/1.5.0',
    error: 'puppet exited 1',
    firstError: 'Error: Evaluation Error: boom',
    resources: {changed: 0, failed: 1, outOfSync: 0},
    durationMs: 4000,
    pointer: 'foo/tags/1.4.0',
    applied: {release: 'foo/tags/1.4.0', runId: 'x'},
    drift: {count: 2},
    puppetDisabled: {message: 'ops'},
  }
  const {transport, ran} = await fakeSsh(t, [target('web1'), target('web2'), target('web3')], {'web1-status': {json: status, rc: 1}, 'web3-status': {json: {...status, id: 'another'}, rc: 0}})
  const found = await transport.discover()
  t.deepEqual(found.web2, {pointer: null, applied: null, newest: null, disabled: null, drift: null})
  t.like(found.web1, {pointer: 'foo/tags/1.4.0', applied: 'foo/tags/1.4.0', disabled: 'ops', drift: 2, newest: {runId: RUN, state: 'failed', message: 'Error: Evaluation Error: boom'}})
  // A node found silent, asked again at its turn, is asked the same question.
  t.deepEqual(await transport.probe(['web1', 'web2']), {web1: found.web1, web2: found.web2})
  const polled = await transport.poll(
    [
      {node: 'web1', runId: RUN},
      {node: 'web3', runId: RUN},
    ],
    30_000,
  )
  t.deepEqual(Object.keys(polled), ['web1'])
  t.like(polled.web1, {state: 'failed', resources: {changed: 0, failed: 1, outOfSync: 0}, durationMs: 4000})
  t.true((await ran()).includes(`web1 status ${RUN} --json --wait --timeout 30`))
})

test('a node that prints more than the bound (8 MiB) after the opening marker did not answer; the others did', async (t) => {
  const {transport} = await fakeSsh(t, [target('flood'), target('web1')], {'web1-status': {json: running, rc: 75}})
  t.deepEqual(Object.keys(await transport.survey(['flood', 'web1'])), ['web1'])
  // The same answer within the bound is an answer: what left it out was its size.
  process.env.FLOOD = '1000'
  t.teardown(() => void delete process.env.FLOOD)
  t.deepEqual(Object.keys(await transport.survey(['flood', 'web1'])).sort(), ['flood', 'web1'])
})

test('ssh that cannot be run is 69 (the rollout stays resumable)', async (t) => {
  const missing = new SshTransport({ssh: '/nonexistent/ssh', targets: [target('web1')], targetsFrom: '--targets', config: null, knownHosts: null, connectTimeout: null, localpuppet: 'localpuppet', replyTimeout: null})
  const error = await t.throwsAsync(missing.survey(['web1']), {instanceOf: FleetUnavailableError, message: /cannot run \/nonexistent\/ssh/})
  t.is(error?.exitCode, 69)
  await missing.close()
})

test("the answer is what the remote command printed between this call's markers, whatever the node's shell prints around it (property)", (t) => {
  fc.assert(
    fc.property(fc.string(), fc.string(), fc.json(), fc.integer({min: 0, max: 255}), fc.stringMatching(/^[0-9a-f]{24}$/), (before, after, body, code, nonce) => {
      fc.pre(!`${before}${after}`.includes(nonce))
      const printed = `${before}\nlp-begin-${nonce}\n${body}\nlp-end-${nonce} ${code}\n${after}`
      t.deepEqual(readMarked(printed, nonce), {exitCode: code, body})
      t.is(readMarked(`${before}${after}`, nonce), null)
    }),
  )
  t.true(remoteCommand('/opt/local puppet', ['status', "it's"], 'ab').includes(`'/opt/local puppet' status 'it'\\''s' </dev/null`))
})

/** A transport whose ssh is the real one's option parser (ssh -G, logged) in front of sh, as a node's shell would run the command; localpuppet answers {"id": "r1"}. */
async function realSshOptions(t: {teardown(fn: () => Promise<void>): void}, options: Partial<SshOptions>) {
  const dir = await mkdtemp(join(tmpdir(), 'localpuppet-ssh-G-'))
  t.teardown(() => rm(dir, {recursive: true, force: true}))
  const ssh = join(dir, 'ssh')
  await writeFile(ssh, `#!/bin/sh\nlast=; for a; do last=$a; done\n/usr/bin/ssh -G "$@" > ${dir}/G 2>&1 || { cat ${dir}/G >&2; exit 255; }\nsh -c "$last"\n`)
  const localpuppet = join(dir, 'localpuppet')
  await writeFile(localpuppet, '#!/bin/sh\necho \'{"id": "r1"}\'\n')
  await chmod(ssh, 0o755)
  await chmod(localpuppet, 0o755)
  const transport = new SshTransport({ssh, targets: [target('web1')], targetsFrom: '--targets', config: null, knownHosts: null, connectTimeout: 3, localpuppet, replyTimeout: null, ...options})
  t.teardown(() => transport.close())
  return {dir, transport, seen: async () => readFile(join(dir, 'G'), 'utf8')}
}

test('a known hosts file or a temporary directory whose path has spaces, quotes or "%" reaches ssh as that one path, never split into several nor expanded (real ssh -G reads the options)', async (t) => {
  // Short: a control socket's path must fit in sun_path.
  const dir = await mkdtemp(join(tmpdir(), 'lp-'))
  t.teardown(() => rm(dir, {recursive: true, force: true}))
  const odd = join(dir, 'a  "b" \\ %d')
  await mkdir(odd)
  const knownHosts = join(odd, 'known hosts')
  const {transport, seen} = await realSshOptions(t, {knownHosts})
  const before = process.env.TMPDIR
  process.env.TMPDIR = odd
  // The control directory is named when the call starts.
  const answer = transport.run('web1', ['status', '--json'], 5)
  if (before === undefined) delete process.env.TMPDIR
  else process.env.TMPDIR = before
  t.like(await answer, {kind: 'answer', exitCode: 0, json: {id: 'r1'}})
  const options = await seen()
  t.true(options.includes(`\nuserknownhostsfile ${knownHosts}\n`), options)
  t.true(/\ncontrolpath (.*)\n/.exec(options)![1].startsWith(join(odd, 'localpuppet-ssh-')), options)
})

test("no trust on first use, whatever the operator's ssh configuration says: its StrictHostKeyChecking accept-new, BatchMode no or control path give way to the transport's (real ssh -G)", async (t) => {
  const {dir, transport, seen} = await realSshOptions(t, {})
  const config = join(dir, 'config')
  await writeFile(config, `Host *\n  StrictHostKeyChecking accept-new\n  BatchMode no\n  ControlPath ${dir}/theirs-%C\n  ControlMaster no\n`)
  transport.options.config = config
  t.like(await transport.run('web1', ['status', '--json'], 5), {kind: 'answer', json: {id: 'r1'}})
  const options = await seen()
  for (const line of ['stricthostkeychecking true', 'batchmode yes', 'controlmaster auto']) t.true(options.includes(`\n${line}\n`), line)
  t.false(options.includes('theirs-'), options)
})

test('the control sockets lie in a directory of this user alone (0700, in sticky /tmp): another local user can neither list it, put a socket of theirs there nor move it aside (lp-hostile)', async (t) => {
  if (hostileUid() === null) return t.pass('needs root to run as lp-hostile')
  const {transport, calls} = await fakeSsh(t, [target('web1')], {})
  await transport.survey(['web1'])
  const option = (await calls())[0].find((arg) => arg.startsWith('ControlPath='))!
  const dir = option.slice('ControlPath="'.length).split('/%C')[0]
  const info = await stat(dir)
  t.is(info.mode & 0o777, 0o700)
  t.is(info.uid, process.geteuid!())
  for (const attack of [`ls ${dir}`, `touch ${dir}/x`, `python3 -c "import socket; socket.socket(socket.AF_UNIX).bind('${dir}/y')"`, `mv ${dir} ${dir}.gone`]) {
    t.throws(() => asHostile(`${attack} 2>/dev/null`), undefined, attack)
  }

  t.true(existsSync(dir))
})

test('a node ssh gave up on by itself is no answer, and why is said once on stderr naming it: a mistake in --ssh-config names the file and line rather than leaving every node silent (real ssh)', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'localpuppet-ssh-config-'))
  t.teardown(() => rm(dir, {recursive: true, force: true}))
  const config = join(dir, 'config')
  await writeFile(config, 'Host *\n  ConectTimeout 5\n')
  const warnings: string[] = []
  const transport = new SshTransport({ssh: '/usr/bin/ssh', targets: [target('web1'), target('web2')], targetsFrom: '--targets', config, knownHosts: null, connectTimeout: 3, localpuppet: 'localpuppet', replyTimeout: null}, (line) => warnings.push(line))
  t.teardown(() => transport.close())
  t.deepEqual(await transport.survey(['web1', 'web2']), {})
  await transport.survey(['web1'])
  t.deepEqual(warnings.sort(), ['web1', 'web2'].map((node) => `${node}: no answer: ${config}: line 2: Bad configuration option: conecttimeout`))
})

test('close() ends the master connections at most 32 at a time, however many nodes were reached (a fleet of 40 here)', async (t) => {
  const nodes = Array.from({length: 40}, (_, index) => `web${index + 1}`)
  const {transport, calls} = await fakeSsh(t, nodes.map((node) => target(node)), {})
  t.is(Object.keys(await transport.survey(nodes)).length, 40)
  const ssh = transport.options.ssh
  const log = join(ssh, '..', 'exits')
  // Each `ssh -O exit` says when it starts and ends, a second apart.
  await writeFile(`${ssh}.real`, await readFile(ssh))
  await writeFile(ssh, `#!/bin/sh\ncase " $* " in *" -O exit "*) echo start >> ${log}; sleep 1; echo end >> ${log}; exit 0;; esac\nexec ${ssh}.real "$@"\n`)
  await chmod(`${ssh}.real`, 0o755)
  await transport.close()
  let going = 0
  let most = 0
  for (const line of (await readFile(log, 'utf8')).trim().split('\n')) {
    going += line === 'start' ? 1 : -1
    most = Math.max(most, going)
  }

  t.true(most <= 32, `${most} at once`)
  t.is((await readFile(log, 'utf8')).split('start').length - 1, 40)
  t.true((await calls()).length >= 40)
})

test('a long TMPDIR does not make every node silent: the control sockets go where their path fits (sun_path), and ssh reaches the node (real ssh, a closed port on 127.0.0.1)', async (t) => {
  const long = await mkdtemp(join(tmpdir(), `localpuppet-${'long'.repeat(16)}-`))
  t.teardown(() => rm(long, {recursive: true, force: true}))
  const warnings: string[] = []
  const transport = new SshTransport({ssh: '/usr/bin/ssh', targets: [{node: 'web1', host: '127.0.0.1', user: null, port: 1}], targetsFrom: '--targets', config: '/dev/null', knownHosts: null, connectTimeout: 3, localpuppet: 'localpuppet', replyTimeout: null}, (line) => warnings.push(line))
  t.teardown(() => transport.close())
  const before = process.env.TMPDIR
  process.env.TMPDIR = long
  const survey = transport.survey(['web1'])
  if (before === undefined) delete process.env.TMPDIR
  else process.env.TMPDIR = before
  t.deepEqual(await survey, {})
  t.deepEqual(warnings, ['web1: no answer: ssh: connect to host 127.0.0.1 port 1: Connection refused'])
})
