import {spawn} from 'node:child_process'
import {closeSync, existsSync, openSync} from 'node:fs'
import {appendFile, copyFile, cp, mkdir, mkdtemp, readFile, readdir, rm, symlink, writeFile} from 'node:fs/promises'
import {createConnection, createServer} from 'node:net'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'

import test from 'ava'
import {execa} from 'execa'

import {BIN, FIXTURES, REPO, isolatePuppet} from '../helpers/cli.js'

/*
 * A real fleet on 127.0.0.1: RabbitMQ with STOMP (its own epmd, ports, HOME and data
 * directory), three mcollectived (web1, web2: role=web; db1: role=db) each with its own
 * module dir, state dir and Puppet dirs, and the mco client, all driving the localpuppet
 * agent in integrations/mcollective/. Every process started here is stopped by its PID
 * (each is the leader of its own process group) in after.always, pass or fail.
 */

const OVERALL_MS = 4 * 60_000
/** Set when the fleet starts: everything after must be done by then. */
let deadline = Number.POSITIVE_INFINITY
const RABBITMQ_SERVER = '/usr/lib/rabbitmq/bin/rabbitmq-server'
const MCOLLECTIVED = '/usr/sbin/mcollectived'
const MCO = '/usr/bin/mco'
const EPMD = '/usr/bin/epmd'
const PACKAGES: Array<[string, string]> = [
  [RABBITMQ_SERVER, 'rabbitmq-server'],
  [EPMD, 'erlang-base'],
  [MCOLLECTIVED, 'mcollective'],
  [MCO, 'mcollective-client'],
]
const RUN_ID = /^\d{8}T\d{6}\.\d{3}Z-[0-9a-f]{4}$/

interface Node {
  name: string
  role: 'web' | 'db'
  dir: string
  state: string
}

interface Reply {
  sender: string
  statuscode: number
  statusmsg: string
  data: Record<string, any>
}

interface Started {
  name: string
  pid: number
  exit: Promise<number | null>
  log: string
}

const started: Started[] = []
// If the worker dies without running after.always (a crash, ava's own timeout), still leave nothing behind.
process.once('exit', () => {
  for (const entry of started) {
    try {
      process.kill(-entry.pid, 'SIGKILL')
    } catch {}
  }
})
let base = ''
const nodes: Node[] = []

/** Installs what is missing when we are root (bin/setup does the same); otherwise says why the fleet cannot run. */
async function missingPackages(): Promise<string | undefined> {
  const missing = () => PACKAGES.filter(([path]) => !existsSync(path)).map(([, pkg]) => pkg)
  if (missing().length === 0) return undefined
  if (process.getuid?.() !== 0) return `missing Debian packages ${missing().join(', ')} and not root to install them (run bin/setup as root)`
  const env = {...process.env, DEBIAN_FRONTEND: 'noninteractive'}
  const update = await execa('apt-get', ['update', '-qq'], {reject: false, env, timeout: 120_000})
  const install = await execa('apt-get', ['install', '-y', '-qq', '--no-install-recommends', ...missing()], {reject: false, env, timeout: 180_000})
  return missing().length === 0 ? undefined : `missing Debian packages ${missing().join(', ')}; apt-get failed: ${String(update.stderr || install.stderr).trim().split('\n').pop()}`
}

const unavailable = await missingPackages()
if (unavailable) console.warn(`mcollective.test.ts: skipping the MCollective fleet tests: ${unavailable}`)
const fleetTest = unavailable ? test.serial.skip : test.serial

function remaining(): number {
  const left = deadline - Date.now()
  if (left <= 0) throw new Error(`the MCollective fleet test ran out of its ${OVERALL_MS / 1000} s`)
  return left
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.on('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const {port} = server.address() as {port: number}
      server.close(() => resolve(port))
    })
  })
}

async function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({host: '127.0.0.1', port})
    socket.once('connect', () => {
      socket.destroy()
      resolve(true)
    })
    socket.once('error', () => resolve(false))
  })
}

/** Starts a long-running process as the leader of a new process group, its output in a log file. */
async function start(name: string, file: string, args: string[], env: Record<string, string> = {}): Promise<Started> {
  const log = join(base, `${name}.out`)
  const fd = openSync(log, 'a')
  const childEnv: Record<string, string | undefined> = {...process.env, ...env}
  for (const key of ['LOCALPUPPET_MODULE_DIR', 'LOCALPUPPET_STATE_DIR', 'LOCALPUPPET_PUPPET']) delete childEnv[key]
  const child = spawn(file, args, {detached: true, stdio: ['ignore', fd, fd], env: childEnv})
  closeSync(fd)
  if (child.pid === undefined) throw new Error(`${name} did not start`)
  const exit = new Promise<number | null>((resolve) => {
    child.once('exit', (code) => resolve(code))
    child.once('error', () => resolve(null))
  })
  const entry = {name, pid: child.pid, exit, log}
  started.push(entry)
  return entry
}

async function exited(entry: Started, ms: number): Promise<boolean> {
  return Promise.race([entry.exit.then(() => true), sleep(ms).then(() => false)])
}

/** SIGTERM to the process group, SIGKILL if it lingers; the group id is the PID we started. */
async function stop(entry: Started): Promise<void> {
  for (const signal of ['SIGTERM', 'SIGKILL'] as const) {
    try {
      process.kill(-entry.pid, signal)
    } catch {
      return
    }

    if (await exited(entry, signal === 'SIGTERM' ? 15_000 : 5000)) break
  }

  // Children of the leader (erl_child_setup, a shell) may outlive it for a moment.
  for (let i = 0; i < 20; i++) {
    try {
      process.kill(-entry.pid, 0)
    } catch {
      return
    }

    if (i === 10) process.kill(-entry.pid, 'SIGKILL')
    await sleep(100)
  }
}

async function waitFor<T>(what: string, probe: () => Promise<T | undefined>, limitMs: number, everyMs = 250): Promise<T> {
  const until = Math.min(Date.now() + limitMs, deadline)
  for (;;) {
    const value = await probe()
    if (value !== undefined) return value
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`)
    await sleep(everyMs)
  }
}

async function tail(file: string): Promise<string> {
  return (await readFile(file, 'utf8').catch(() => '')).split('\n').slice(-15).join('\n')
}

const clientConfig = () => join(base, 'client.cfg')

/** `mco rpc localpuppet ACTION ...` with --json: mco's exit code and every node's reply, sorted by sender. */
async function rpc(action: string, args: string[]): Promise<{exitCode: number; replies: Reply[]; stderr: string}> {
  const result = await execa(MCO, ['rpc', 'localpuppet', action, ...args, '--json', '--dt', '1', '--config', clientConfig()], {
    reject: false,
    // mco reads node names from a standard input that is not a TTY, and waits for its end.
    stdin: 'ignore',
    timeout: Math.min(90_000, remaining()),
    env: {HOME: join(base, 'home')},
  })
  let replies: Reply[] = []
  try {
    replies = JSON.parse(String(result.stdout))
  } catch {}

  replies.sort((a, b) => a.sender.localeCompare(b.sender))
  return {exitCode: result.exitCode ?? -1, replies, stderr: String(result.stderr)}
}

function brokerSettings(port: number): string {
  return [
    'connector = rabbitmq',
    'plugin.rabbitmq.vhost = /mcollective',
    'plugin.rabbitmq.pool.size = 1',
    'plugin.rabbitmq.pool.1.host = 127.0.0.1',
    `plugin.rabbitmq.pool.1.port = ${port}`,
    'plugin.rabbitmq.pool.1.user = mcollective',
    'plugin.rabbitmq.pool.1.password = marionette',
    // Without a limit a client or server retries a broker that is gone for ever.
    'plugin.rabbitmq.max_reconnect_attempts = 5',
    'securityprovider = psk',
    'plugin.psk = localpuppet-test',
    'main_collective = mcollective',
    'collectives = mcollective',
    `libdir = ${join(base, 'lib')}`,
  ].join('\n')
}

async function startBroker(): Promise<number> {
  const [epmdPort, distPort, stompPort] = [await freePort(), await freePort(), await freePort()]
  const rabbit = join(base, 'rabbitmq')
  await mkdir(join(rabbit, 'home'), {recursive: true})
  await writeFile(
    join(rabbit, 'definitions.json'),
    JSON.stringify({
      users: [{name: 'mcollective', password: 'marionette', tags: ''}],
      vhosts: [{name: '/mcollective'}],
      permissions: [{user: 'mcollective', vhost: '/mcollective', configure: '.*', write: '.*', read: '.*'}],
      exchanges: ['mcollective_broadcast:topic', 'mcollective_directed:direct'].map((entry) => {
        const [name, type] = entry.split(':')
        return {name, vhost: '/mcollective', type, durable: true, auto_delete: false, internal: false, arguments: {}}
      }),
    }),
  )
  await writeFile(
    join(rabbit, 'rabbitmq.conf'),
    ['listeners.tcp = none', `stomp.listeners.tcp.1 = 127.0.0.1:${stompPort}`, `load_definitions = ${join(rabbit, 'definitions.json')}`, ''].join('\n'),
  )
  await writeFile(join(rabbit, 'enabled_plugins'), '[rabbitmq_stomp].\n')
  const erlang = {HOME: join(rabbit, 'home'), ERL_EPMD_PORT: String(epmdPort), ERL_EPMD_ADDRESS: '127.0.0.1'}

  // Our own epmd first, on its own port: otherwise the broker starts one that is nobody's to stop.
  await start('epmd', EPMD, ['-address', '127.0.0.1', '-port', String(epmdPort)], erlang)
  await waitFor('epmd', async () => ((await portOpen(epmdPort)) ? true : undefined), 10_000, 50)

  const broker = await start('rabbitmq', RABBITMQ_SERVER, [], {
    ...erlang,
    RABBITMQ_CONF_ENV_FILE: join(rabbit, 'rabbitmq-env.conf'),
    RABBITMQ_CONFIG_FILE: join(rabbit, 'rabbitmq.conf'),
    RABBITMQ_ADVANCED_CONFIG_FILE: join(rabbit, 'advanced.config'),
    RABBITMQ_ENABLED_PLUGINS_FILE: join(rabbit, 'enabled_plugins'),
    RABBITMQ_MNESIA_BASE: join(rabbit, 'mnesia'),
    RABBITMQ_LOG_BASE: join(rabbit, 'log'),
    RABBITMQ_PID_FILE: join(rabbit, 'rabbitmq.pid'),
    RABBITMQ_NODENAME: `localpuppet-test-${process.pid}@localhost`,
    RABBITMQ_NODE_IP_ADDRESS: '127.0.0.1',
    RABBITMQ_DIST_PORT: String(distPort),
    RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS: '-kernel inet_dist_use_interface {127,0,0,1}',
  })
  let gone = false
  void broker.exit.then(() => (gone = true))
  await waitFor(
    'RabbitMQ to open its STOMP port',
    async () => {
      if (gone) throw new Error(`RabbitMQ exited while starting:\n${await tail(broker.log)}`)
      return (await portOpen(stompPort)) ? true : undefined
    },
    120_000,
  )
  return stompPort
}

async function startNode(node: Node, stompPort: number): Promise<void> {
  await cp(join(FIXTURES, 'demo', 'modules'), join(node.dir, 'modules'), {recursive: true})
  await mkdir(join(node.dir, 'plugin.d'), {recursive: true})
  const port = node.name === 'web1' ? 8081 : node.name === 'web2' ? 8082 : 5432
  // The node's own input pins foo 1.3.0; the test's apply overrides the app.
  await writeFile(join(node.dir, 'input.yaml'), `app: foo/tags/1.3.0\nclasses:\n  foo:\n    port: ${port}\n  platform:\nparameters:\n  role: ${node.role}\n  enabled: yes\n`)
  await writeFile(join(node.dir, 'facts.yaml'), `role: ${node.role}\nnode: ${node.name}\n`)
  await writeFile(
    join(node.dir, 'server.cfg'),
    [
      brokerSettings(stompPort),
      `identity = ${node.name}`,
      `logfile = ${join(node.dir, 'mcollective.log')}`,
      'loglevel = info',
      'daemonize = 0',
      `classesfile = ${join(node.dir, 'classes.txt')}`,
      'factsource = yamlfile',
      `plugin.yaml = ${join(node.dir, 'facts.yaml')}`,
      '',
    ].join('\n'),
  )
  // The shipped example, then this node's values (later lines win).
  const pluginConfig = join(node.dir, 'plugin.d', 'localpuppet.cfg')
  await copyFile(join(REPO, 'integrations/mcollective/plugin.d/localpuppet.cfg'), pluginConfig)
  await appendFile(
    pluginConfig,
    [
      '',
      `executable = ${BIN}`,
      `input = ${join(node.dir, 'input.yaml')}`,
      `module_dir = ${join(node.dir, 'modules')}`,
      `state_dir = ${node.state}`,
      `puppet_args = ${isolatePuppet(node.dir).join(' ')}`,
      '',
    ].join('\n'),
  )
  await start(`mcollectived-${node.name}`, MCOLLECTIVED, ['--config', join(node.dir, 'server.cfg'), '--no-daemonize'], {HOME: join(base, 'home')})
}

/** Runs still going on a node (started by the agent, so not in our process groups). */
async function stopDetachedRuns(): Promise<void> {
  for (const node of nodes) {
    const runs = await readdir(join(node.state, 'runs')).catch(() => [] as string[])
    for (const id of runs) {
      const record = JSON.parse(await readFile(join(node.state, 'runs', id, 'run.json'), 'utf8').catch(() => '{}'))
      if (record.state !== 'running' || typeof record.pid !== 'number') continue
      try {
        process.kill(record.pid, 'SIGTERM')
      } catch {
        continue
      }

      for (let i = 0; i < 100; i++) {
        try {
          process.kill(record.pid, 0)
        } catch {
          break
        }

        await sleep(100)
      }
    }
  }
}

test.before(async () => {
  if (unavailable) return
  deadline = Date.now() + OVERALL_MS
  base = await mkdtemp(join(tmpdir(), 'localpuppet-mco-'))
  await mkdir(join(base, 'home'))
  await mkdir(join(base, 'lib'))
  // A libdir holds mcollective/agent/*.rb and mcollective/facts/*.rb: integrations/mcollective is laid out as that mcollective/.
  await symlink(join(REPO, 'integrations', 'mcollective'), join(base, 'lib', 'mcollective'))
  for (const [name, role] of [['web1', 'web'], ['web2', 'web'], ['db1', 'db']] as const) {
    nodes.push({name, role, dir: join(base, name), state: join(base, name, 'state')})
  }

  const stompPort = await startBroker()
  await writeFile(clientConfig(), [brokerSettings(stompPort), 'logger_type = console', 'loglevel = warn', ''].join('\n'))
  for (const node of nodes) await startNode(node, stompPort)

  const everyone = nodes.map((node) => node.name).sort()
  let found = ''
  await waitFor(
    'all three mcollectived to answer discovery',
    async () => {
      for (const entry of started) if (await exited(entry, 0)) throw new Error(`${entry.name} exited:\n${await tail(entry.log)}`)
      const result = await execa(MCO, ['find', '--dt', '1', '--config', clientConfig()], {reject: false, stdin: 'ignore', timeout: 30_000, env: {HOME: join(base, 'home')}})
      found = `${result.stdout}${result.stderr}`
      const identities = String(result.stdout).split('\n').filter(Boolean).sort()
      return identities.join() === everyone.join() ? true : undefined
    },
    60_000,
    0,
  ).catch(async (error) => {
    throw new Error(`${error.message}; mco find said: ${found}\n${(await Promise.all(nodes.map(async (node) => tail(join(node.dir, 'mcollective.log'))))).join('\n')}`)
  })
})

test.after.always(async () => {
  await stopDetachedRuns()
  for (const entry of [...started].reverse()) await stop(entry)
  started.length = 0
  if (base) await rm(base, {recursive: true, force: true})
})

fleetTest(`apply -W role=web runs real Puppet on the web nodes only; status, history and releases report it${unavailable ? ` (${unavailable})` : ''}`, async (t) => {
  t.timeout(OVERALL_MS)
  const applied = await rpc('apply', ['app=foo@^1.4', '-W', 'role=web'])
  t.is(applied.exitCode, 0, applied.stderr)
  t.deepEqual(
    applied.replies.map((reply) => reply.sender),
    ['web1', 'web2'],
    'the db node matched no filter',
  )
  for (const reply of applied.replies) {
    t.is(reply.statuscode, 0, reply.statusmsg)
    t.is(reply.data.state, 'running')
    t.is(reply.data.release, 'foo/tags/1.4.0', 'the app override wins over the input')
    t.is(reply.data.exit_code, 0)
    t.regex(reply.data.run_id, RUN_ID)
  }

  // Poll the fleet until both web nodes report how their run went.
  const finished = await waitFor(
    'the web nodes to finish their runs',
    async () => {
      const status = await rpc('status', ['-W', 'role=web'])
      const states = status.replies.map((reply) => reply.data.state)
      if (states.some((state) => ['failed', 'error', 'interrupted'].includes(state))) {
        throw new Error(`a run did not succeed: ${JSON.stringify(status.replies)}`)
      }

      return status.replies.length === 2 && states.every((state) => state === 'succeeded') ? status : undefined
    },
    120_000,
    500,
  )
  t.is(finished.exitCode, 0)
  for (const [i, reply] of finished.replies.entries()) {
    t.is(reply.statuscode, 0)
    t.is(reply.data.run_id, applied.replies[i].data.run_id)
    t.is(reply.data.release, 'foo/tags/1.4.0')
    t.is(reply.data.ref, 'foo@^1.4')
    t.is(reply.data.changed, 3)
    t.is(reply.data.failed, 0)
    const log = await readFile(reply.data.log, 'utf8')
    t.regex(log, /Notice: I notify you!/)
    t.regex(log, new RegExp(`Notice: foo listens on ${reply.sender === 'web1' ? 8081 : 8082}`), 'the node applied its own input')
    const record = JSON.parse(await readFile(join(base, reply.sender, 'state', 'runs', reply.data.run_id, 'run.json'), 'utf8'))
    t.is(record.input.document.parameters.enabled, 'yes', 'the override kept YAML 1.2 meaning (yes is a string)')
    t.true(existsSync(join(base, reply.sender, 'puppet', 'var')), "Puppet's own state stayed in the node's directory")
  }

  // The db node was not asked, and says so.
  const db = await rpc('status', ['-W', 'role=db'])
  t.is(db.exitCode, 2, 'mco rpc exits 2 when a node reports a failure')
  t.is(db.replies.length, 1)
  t.is(db.replies[0].sender, 'db1')
  t.is(db.replies[0].statuscode, 1)
  t.regex(db.replies[0].statusmsg, /no runs yet/)
  t.is(db.replies[0].data.exit_code, 66)
  t.false(existsSync(join(base, 'db1', 'state', 'runs')) && (await readdir(join(base, 'db1', 'state', 'runs'))).length > 0)

  // Nothing changed since: if_changed skips on both web nodes.
  const again = await rpc('apply', ['app=foo@^1.4', 'if_changed=true', '-W', 'role=web'])
  t.is(again.exitCode, 0, again.stderr)
  const skipped = await waitFor(
    'the skipped runs',
    async () => {
      const status = await rpc('status', ['-W', 'role=web'])
      return status.replies.length === 2 && status.replies.every((reply) => reply.data.state === 'skipped') ? status : undefined
    },
    60_000,
    250,
  )
  for (const reply of skipped.replies) t.regex(reply.data.reason, /nothing changed since run/)

  const history = await rpc('history', ['limit=5', '-I', 'web1'])
  t.is(history.exitCode, 0, history.stderr)
  t.is(history.replies[0].data.count, 2)
  t.deepEqual(
    history.replies[0].data.runs.map((run: {state: string}) => run.state),
    ['skipped', 'succeeded'],
  )
  t.is(history.replies[0].data.runs[1].run_id, applied.replies[0].data.run_id)

  const releases = await rpc('releases', ['-I', 'db1'])
  t.is(releases.exitCode, 0, releases.stderr)
  const foo = releases.replies[0].data.releases.find((app: {app: string}) => app.app === 'foo')
  t.deepEqual(
    foo.tags.map((tag: {tag: string}) => tag.tag),
    ['1.4.0', '1.3.0'],
  )

  // noop reaches Puppet: the notifies are out of sync but nothing changed.
  const noop = await rpc('apply', ['noop=true', '-I', 'web2'])
  t.is(noop.replies[0]?.statuscode, 0, noop.stderr)
  t.is(noop.replies[0].data.release, 'foo/tags/1.3.0', "without app, the node's input decides")
  const dry = await waitFor(
    'the noop run',
    async () => {
      const status = await rpc('status', [`run_id=${noop.replies[0].data.run_id}`, '-I', 'web2'])
      return status.replies[0]?.data.state === 'running' ? undefined : status.replies[0]
    },
    60_000,
    250,
  )
  t.is(dry.data.state, 'succeeded', dry.statusmsg)
  t.true(dry.data.noop)
  t.is(dry.data.changed, 0)
  t.is(dry.data.out_of_sync, 3)
})

fleetTest(`fast failures become failed replies with localpuppet's exit code; the DDL refuses bad inputs${unavailable ? ` (${unavailable})` : ''}`, async (t) => {
  t.timeout(OVERALL_MS)
  const unknown = await rpc('apply', ['app=nosuch@^1', '-I', 'db1'])
  t.is(unknown.exitCode, 2)
  t.is(unknown.replies.length, 1)
  t.is(unknown.replies[0].statuscode, 1)
  t.is(unknown.replies[0].data.exit_code, 66)
  t.is(unknown.replies[0].data.error_code, 'not-found')
  t.regex(unknown.replies[0].statusmsg, /nosuch/)

  const noInput = await rpc('apply', [`input=${join(base, 'nowhere', 'input.yaml')}`, '-I', 'db1'])
  t.is(noInput.replies[0].statuscode, 1)
  t.is(noInput.replies[0].data.exit_code, 66)

  const noRun = await rpc('status', ['run_id=20200101T000000.000Z-0000', '-I', 'db1'])
  t.is(noRun.replies[0].statuscode, 1)
  t.is(noRun.replies[0].data.exit_code, 66)
  // Nothing ran on db1: its refused attempts are recorded as such (issue 9), nothing else.
  const db1Runs = existsSync(join(base, 'db1', 'state', 'runs')) ? await readdir(join(base, 'db1', 'state', 'runs')) : []
  for (const id of db1Runs) t.is(JSON.parse(await readFile(join(base, 'db1', 'state', 'runs', id, 'run.json'), 'utf8')).state, 'refused', 'nothing ran on db1')

  // The client checks inputs against the DDL and sends nothing.
  for (const bad of [['status', 'run_id=latest'], ['apply', 'input=relative/input.yaml'], ['apply', 'input=/etc/shadow'], ['apply', 'app=foo;rm -rf /']]) {
    const refused = await rpc(bad[0], [bad[1], '-I', 'db1'])
    t.not(refused.exitCode, 0, bad.join(' '))
    t.deepEqual(refused.replies, [], bad.join(' '))
    t.regex(refused.stderr, /validat/i, bad.join(' '))
  }

  const override = await rpc('apply', [`input=${join(base, 'nowhere', 'input.yaml')}`, 'app=foo/trunk', '-I', 'db1'])
  t.is(override.replies[0].statuscode, 1)
  t.is(override.replies[0].data.exit_code, 66)
  t.regex(override.replies[0].statusmsg, /input file .*nowhere.*: not found/)
})

fleetTest(`the app override edits the input as text, keeping every other byte${unavailable ? ` (${unavailable})` : ''}`, async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'localpuppet-mco-input-'))
  t.teardown(() => rm(dir, {recursive: true, force: true}))
  const documents: Record<string, [string, string]> = {
    block: ['# pinned below\napp: foo/tags/1.3.0   # keep me\nparameters:\n  on: yes\n', '# pinned below\napp: "foo@^1.4"   # keep me\nparameters:\n  on: yes\n'],
    folded: ['app: >-\n  foo/tags/1.3.0\nclasses: [foo]\n', 'app: "foo@^1.4"\nclasses: [foo]\n'],
    empty: ['app:\nclasses: [foo]\n', 'app: "foo@^1.4"\nclasses: [foo]\n'],
    missing: ['---\nclasses: [foo]\n', '---\napp: "foo@^1.4"\nclasses: [foo]\n'],
    nested: ['parameters:\n  app: mine\n', 'app: "foo@^1.4"\nparameters:\n  app: mine\n'],
    flow: ["{classes: [foo], app: 'foo/trunk'}\n", '{classes: [foo], app: "foo@^1.4"}\n'],
    flowMissing: ['{classes: [foo]}\n', '{app: "foo@^1.4", classes: [foo]}\n'],
    notMapping: ['- foo\n', '- foo\n'],
  }
  for (const [name, [text]] of Object.entries(documents)) await writeFile(join(dir, `${name}.yaml`), text)
  // The agent's own method, on an agent that was never started: no broker needed.
  const script = `
    require 'mcollective'
    require 'json'
    require ${JSON.stringify(join(REPO, 'integrations/mcollective/agent/localpuppet.rb'))}
    agent = MCollective::Agent::Localpuppet.allocate
    puts JSON.generate(ARGV.to_h { |path| [File.basename(path, '.yaml'), agent.send(:input_with_app, path, 'foo@^1.4')] })
  `
  const ruby = await execa('ruby', ['-e', script, ...Object.keys(documents).map((name) => join(dir, `${name}.yaml`))], {reject: false})
  t.is(ruby.exitCode, 0, ruby.stderr)
  const edited = JSON.parse(ruby.stdout)
  for (const [name, [, expected]] of Object.entries(documents)) t.is(edited[name], expected, name)
})
