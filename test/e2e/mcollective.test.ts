import {spawn} from 'node:child_process'
import {closeSync, existsSync, openSync} from 'node:fs'
import {appendFile, copyFile, cp, mkdir, mkdtemp, readFile, readdir, rm, symlink, writeFile} from 'node:fs/promises'
import {createConnection, createServer} from 'node:net'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'

import test from 'ava'
import {execa} from 'execa'

import {BIN, FIXTURES, REPO, cli, isolatePuppet} from '../helpers/cli.js'
import {writeTree} from '../helpers/temp.js'

/*
 * A real fleet on 127.0.0.1: RabbitMQ with STOMP (its own epmd, ports, HOME and data
 * directory), five mcollectived (db1, db2: role=db; web1, web2, web3: role=web) each with
 * its own module dir, state dir and Puppet dirs, and the mco client, all driving the
 * localpuppet agent and the `mco localpuppet` application in integrations/mcollective/.
 * Every process started here is stopped by its PID (each is the leader of its own process
 * group) in after.always, pass or fail.
 */

const OVERALL_MS = 8 * 60_000
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
  port: number
  dir: string
  state: string
  daemon?: Started
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

/** `mco localpuppet ARGS...`: its exit code, its output, and its JSON when asked for. */
async function app(args: string[]): Promise<{exitCode: number; stdout: string; stderr: string; json: any}> {
  const result = await execa(MCO, ['localpuppet', ...args, '--dt', '1', '--config', clientConfig()], {
    reject: false,
    stdin: 'ignore',
    timeout: Math.min(240_000, remaining()),
    env: {HOME: join(base, 'home')},
  })
  let json: any
  try {
    json = JSON.parse(String(result.stdout))
  } catch {}

  return {exitCode: result.exitCode ?? -1, stdout: String(result.stdout), stderr: String(result.stderr), json}
}

/** The row of one node in an `mco localpuppet ... --json` answer. */
const row = (answer: {json: any}, node: string) => answer.json?.nodes?.find((entry: {node: string}) => entry.node === node)

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

/**
 * The node's own settings, as its node configuration holds them: a wrapper around the CLI
 * that the agent runs (module dir and state dir from the environment, the node's input
 * when apply names none, Puppet's own state kept in the node's directory).
 */
async function nodeSettings(node: Node): Promise<string> {
  const wrapper = join(node.dir, 'localpuppet')
  await writeFile(
    wrapper,
    [
      '#!/bin/sh',
      `export LOCALPUPPET_MODULE_DIR='${join(node.dir, 'modules')}' LOCALPUPPET_STATE_DIR='${node.state}'`,
      'case "$1" in',
      `  apply) shift; case "$1" in /*) input=$1; shift ;; *) input='${join(node.dir, 'input.yaml')}' ;; esac`,
      `    exec node '${BIN}' apply "$input" "$@" -- ${isolatePuppet(node.dir).join(' ')} ;;`,
      `  disable | enable | rollback) exec node '${BIN}' "$@" -- ${isolatePuppet(node.dir).join(' ')} ;;`,
      'esac',
      `exec node '${BIN}' "$@"`,
      '',
    ].join('\n'),
    {mode: 0o755},
  )
  return wrapper
}

async function startNode(node: Node, stompPort: number): Promise<void> {
  await cp(join(FIXTURES, 'demo', 'modules'), join(node.dir, 'modules'), {recursive: true})
  // A release whose run takes a while: the daemon can be stopped while it runs.
  await writeTree(join(node.dir, 'modules', 'slow', 'tags', '1.0.0'), {
    'manifest.yaml': 'modulepath: []\n',
    'slow/manifests/init.pp': "class slow { exec { 'nap': command => '/bin/sleep 25', path => ['/bin', '/usr/bin'] } }\n",
  })
  await mkdir(join(node.dir, 'plugin.d'), {recursive: true})
  // The node's own input pins foo 1.3.0.
  await writeFile(join(node.dir, 'input.yaml'), `app: foo/tags/1.3.0\nclasses:\n  foo:\n    port: ${node.port}\n  platform:\nparameters:\n  role: ${node.role}\n  enabled: yes\n`)
  await writeFile(join(node.dir, 'facts.yaml'), `role: ${node.role}\nnode: ${node.name}\n`)
  await writeFile(
    join(node.dir, 'server.cfg'),
    [
      brokerSettings(stompPort),
      `identity = ${node.name}`,
      `logfile = ${join(node.dir, 'mcollective.log')}`,
      // debug: the agent logs each localpuppet command it runs (a test waits for one).
      'loglevel = debug',
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
  await appendFile(pluginConfig, ['', `executable = ${await nodeSettings(node)}`, ''].join('\n'))
  await startDaemon(node)
}

async function startDaemon(node: Node): Promise<void> {
  node.daemon = await start(`mcollectived-${node.name}`, MCOLLECTIVED, ['--config', join(node.dir, 'server.cfg'), '--no-daemonize'], {HOME: join(base, 'home')})
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

/** What the CLI this branch was built with can do (features other branches add as they land). */
const applyHelp = (await cli(['apply', '--help'])).stdout
const HAS_APP = /--app\b/.test(applyHelp) && /--save\b/.test(applyHelp)
const appTest = HAS_APP ? fleetTest : test.serial.skip

test.before(async () => {
  if (unavailable) return
  deadline = Date.now() + OVERALL_MS
  base = await mkdtemp(join(tmpdir(), 'localpuppet-mco-'))
  await mkdir(join(base, 'home'))
  await mkdir(join(base, 'lib'))
  // A libdir holds mcollective/{agent,application,facts}/*.rb: integrations/mcollective is laid out as that mcollective/.
  await symlink(join(REPO, 'integrations', 'mcollective'), join(base, 'lib', 'mcollective'))
  const fleet = [
    ['db1', 'db', 5432],
    ['db2', 'db', 5433],
    ['web1', 'web', 8081],
    ['web2', 'web', 8082],
    ['web3', 'web', 8083],
  ] as const
  for (const [name, role, port] of fleet) nodes.push({name, role, port, dir: join(base, name), state: join(base, name, 'state')})

  const stompPort = await startBroker()
  await writeFile(clientConfig(), [brokerSettings(stompPort), 'logger_type = console', 'loglevel = warn', ''].join('\n'))
  for (const node of nodes) await startNode(node, stompPort)
  await writeFile(join(base, 'nodes.txt'), nodes.map((node) => node.name).join('\n') + '\n')
  await everyoneAnswers()
})

/** Waits until discovery finds exactly the fleet. */
async function everyoneAnswers(): Promise<void> {
  const everyone = nodes.map((node) => node.name).sort()
  let found = ''
  await waitFor(
    `all ${everyone.length} mcollectived to answer discovery`,
    async () => {
      for (const entry of started) if (await exited(entry, 0)) throw new Error(`${entry.name} exited:\n${await tail(entry.log)}`)
      const result = await execa(MCO, ['find', '--dt', '1', '--config', clientConfig()], {reject: false, stdin: 'ignore', timeout: 30_000, env: {HOME: join(base, 'home')}})
      found = `${result.stdout}${result.stderr}`
      const identities = String(result.stdout).split('\n').filter(Boolean).sort()
      return identities.join() === everyone.join() ? true : undefined
    },
    90_000,
    0,
  ).catch(async (error) => {
    throw new Error(`${error.message}; mco find said: ${found}\n${(await Promise.all(nodes.map(async (node) => tail(join(node.dir, 'mcollective.log'))))).join('\n')}`)
  })
}

test.after.always(async () => {
  await stopDetachedRuns()
  for (const entry of [...started].reverse()) await stop(entry)
  started.length = 0
  if (base) await rm(base, {recursive: true, force: true})
})

const node = (name: string) => nodes.find((entry) => entry.name === name)!
const runIds = async (name: string) => (await readdir(join(node(name).state, 'runs')).catch(() => [] as string[])).sort()

fleetTest(`mco localpuppet apply --batch 2: the first batch succeeds, a disabled node in the second stops the rollout, the fifth never starts; status counts match${unavailable ? ` (${unavailable})` : ''}`, async (t) => {
  t.timeout(OVERALL_MS)
  const disabled = await rpc('disable', ['message=kernel upgrade until 15:00 (ops)', '-I', 'web1'])
  t.is(disabled.exitCode, 0, disabled.stderr)
  t.true(disabled.replies[0].data.disabled)

  // Sorted by name: db1 db2 | web1 web2 | web3.
  const rollout = await app(['apply', '--batch', '2', '--json'])
  t.is(rollout.exitCode, 1, rollout.stderr)
  t.is(rollout.json.ok, false)
  t.deepEqual(
    rollout.json.nodes.map((entry: {node: string; state: string}) => [entry.node, entry.state]),
    [
      ['db1', 'succeeded'],
      ['db2', 'succeeded'],
      ['web1', 'refused'],
      ['web2', 'succeeded'],
      ['web3', 'not started'],
    ],
  )
  t.is(row(rollout, 'web1').exit_code, 73)
  t.regex(row(rollout, 'web1').message, /kernel upgrade until 15:00/)
  t.is(rollout.json.stopped, 'stopped after batch 2 of 3: web1 refused')
  t.deepEqual(rollout.json.not_succeeded, ['web1', 'web3'])
  for (const name of ['db1', 'db2', 'web2']) {
    const entry = row(rollout, name)
    t.regex(entry.run_id, RUN_ID, name)
    t.is(entry.release, 'foo/tags/1.3.0', name)
    t.is(entry.changed, 3, name)
    t.is(entry.failed, 0, name)
    // Each node's own run: the id the node replied with, and its record says succeeded.
    t.deepEqual(await runIds(name), [entry.run_id], name)
  }

  t.deepEqual(await runIds('web3'), [], 'the fifth node was never started')

  // The same fleet as a table: one line per node, the summary, the nodes that did not succeed.
  const status = await app(['status', '--json'])
  t.is(status.exitCode, 1, 'a node that never ran (and one refused) is not a healthy fleet')
  const states = Object.fromEntries(status.json.nodes.map((entry: {node: string; state: string}) => [entry.node, entry.state]))
  t.is(states.db1, 'succeeded')
  t.is(states.db2, 'succeeded')
  t.is(states.web2, 'succeeded')
  t.is(states.web3, 'no runs')
  // web1's refused attempt is a record once refused attempts are recorded; before, it has no runs.
  t.true(['refused', 'no runs'].includes(states.web1), states.web1)
  const expected: Record<string, number> = {}
  for (const state of Object.values(states) as string[]) expected[state] = (expected[state] ?? 0) + 1
  t.deepEqual(status.json.by_state, expected)
  t.is(status.json.by_release['foo/tags/1.3.0'], 3)
  t.deepEqual(status.json.no_answer, [])

  const table = await app(['status'])
  t.is(table.exitCode, 1)
  t.regex(table.stdout, /^NODE +POINTS_AT +NEWEST +RELEASE +AGE +LAST_COMPLETED +NOTE$/m)
  t.regex(table.stdout, /^db1 .*succeeded +foo\/tags\/1\.3\.0 +\d+s ago/m)
  t.regex(table.stdout, /^By release \(last completed run\): .*foo\/tags\/1\.3\.0 = 3/m)
  t.regex(table.stdout, /^By state \(newest attempt\): /m)

  const enabled = await rpc('enable', ['-I', 'web1'])
  t.is(enabled.exitCode, 0, enabled.stderr)
  t.true(enabled.replies[0].data.was_disabled)

  // --nodes discovery: no broadcast, the same answer.
  const listed = await app(['status', '--json', '--nodes', join(base, 'nodes.txt')])
  t.deepEqual(
    listed.json.nodes.map((entry: {node: string}) => entry.node),
    ['db1', 'db2', 'web1', 'web2', 'web3'],
  )
})

fleetTest(`mco localpuppet history and log; the agent's log action is size-capped data${unavailable ? ` (${unavailable})` : ''}`, async (t) => {
  const history = await app(['history', 'db1', '--limit', '5', '--json'])
  t.is(history.exitCode, 0, history.stderr)
  t.is(history.json.length, 1)
  t.is(history.json[0].state, 'succeeded')
  const text = await app(['history', 'db1'])
  t.regex(text.stdout, /^RUN +STATE +RELEASE +AGE +DURATION +CHANGED +FAILED +MESSAGE$/m)
  t.regex(text.stdout, new RegExp(`^${history.json[0].run_id} +succeeded +foo/tags/1\\.3\\.0 `, 'm'))

  const log = await app(['log', 'db1'])
  t.is(log.exitCode, 0, log.stderr)
  t.regex(log.stdout, /Notice: I notify you!/)
  t.regex(log.stdout, /foo listens on 5432/)
  const byId = await app(['log', 'db1', history.json[0].run_id, '--bytes', '100', '--json'])
  t.is(byId.json.run_id, history.json[0].run_id)
  t.true(byId.json.truncated)
  t.true(Buffer.byteLength(byId.json.text) <= 100)
  t.true(byId.json.size > 100)

  const capped = await rpc('log', ['bytes=2000000', '-I', 'db1'])
  t.is(capped.replies[0].statuscode, 1)
  t.is(capped.replies[0].data.exit_code, 64)
  const none = await app(['log', 'web3'])
  t.is(none.exitCode, 1)
  t.regex(none.stderr, /web3: .*no runs/)
  const silent = await app(['history', 'nosuchnode'])
  t.is(silent.exitCode, 1)
  t.regex(silent.stderr, /nosuchnode did not answer/)
  const usage = await app(['history'])
  t.is(usage.exitCode, 64)
})

fleetTest(`fast failures become failed replies with localpuppet's exit code; the DDL refuses bad inputs${unavailable ? ` (${unavailable})` : ''}`, async (t) => {
  t.timeout(OVERALL_MS)
  const noInput = await rpc('apply', [`input=${join(base, 'nowhere', 'input.yaml')}`, '-I', 'db1'])
  t.is(noInput.exitCode, 2)
  t.is(noInput.replies[0].statuscode, 1)
  t.is(noInput.replies[0].data.exit_code, 66)

  const noRun = await rpc('status', ['run_id=20200101T000000.000Z-0000', '-I', 'db1'])
  t.is(noRun.replies[0].statuscode, 1)
  t.is(noRun.replies[0].data.exit_code, 66)

  // A node is asked about its own run only: one that is not named refuses.
  const notNamed = await rpc('status', ['runs=web2=20200101T000000.000Z-0000', '-I', 'db1'])
  t.is(notNamed.replies[0].statuscode, 1)
  t.regex(notNamed.replies[0].statusmsg, /no run named for db1/)

  // A source in the request only where the node allows it.
  const source = await rpc('fetch', ['ref=foo@^1.5', 'source=http://127.0.0.1:9/repo', '-I', 'db1'])
  t.is(source.replies[0].statuscode, 1)
  t.is(source.replies[0].data.exit_code, 64)
  t.regex(source.replies[0].statusmsg, /allow_request_source/)

  // The client checks inputs against the DDL and sends nothing.
  for (const bad of [
    ['status', 'run_id=latest'],
    ['status', 'runs=db1;x'],
    ['apply', 'input=relative/input.yaml'],
    ['apply', 'input=/etc/shadow'],
    ['apply', 'app=foo;rm -rf /'],
    ['apply', 'timeout=soon'],
    ['apply', 'save=perhaps'],
    ['fetch', 'ref=../../etc'],
    ['fetch', 'ref=foo@^1.5', 'source=ftp://x/y'],
    ['fetch', 'ref=foo@^1.5', 'source=http://x/ y'],
    ['disable', 'message=a\tb'],
    ['log', 'bytes=many'],
  ]) {
    const refused = await rpc(bad[0], [...bad.slice(1), '-I', 'db1'])
    t.not(refused.exitCode, 0, bad.join(' '))
    t.deepEqual(refused.replies, [], bad.join(' '))
  }
})

appTest(`apply app= maps to --app (no text edits), save= makes it the node's release, and the app's REF does the same${unavailable ? ` (${unavailable})` : ''}`, async (t) => {
  t.timeout(OVERALL_MS)
  const before = await readFile(join(node('db2').dir, 'input.yaml'), 'utf8')
  const applied = await rpc('apply', ['app=foo@^1.4', '-I', 'db2'])
  t.is(applied.replies[0]?.statuscode, 0, applied.stderr)
  t.is(applied.replies[0].data.release, 'foo/tags/1.4.0')
  const done = await rpc('status', [`run_id=${applied.replies[0].data.run_id}`, 'wait=50', '-I', 'db2'])
  t.is(done.replies[0].data.state, 'succeeded', done.replies[0].statusmsg)
  t.is(await readFile(join(node('db2').dir, 'input.yaml'), 'utf8'), before, 'without save the input is untouched')

  const saved = await app(['apply', 'foo/tags/1.4.0', '--save', '--json', '-I', 'db1', '-I', 'db2'])
  t.is(saved.exitCode, 0, saved.stdout + saved.stderr)
  for (const name of ['db1', 'db2']) {
    t.is(row(saved, name).state, 'succeeded')
    t.is(row(saved, name).release, 'foo/tags/1.4.0')
    t.regex(await readFile(join(node(name).dir, 'input.yaml'), 'utf8'), /^app: foo\/tags\/1\.4\.0$/m)
  }

  const status = await app(['status', '--json', '-W', 'role=db'])
  for (const name of ['db1', 'db2']) t.is(row(status, name).pointer, 'foo/tags/1.4.0', name)
})

fleetTest(`a node whose daemon is stopped mid-rollout is "no answer", not success${unavailable ? ` (${unavailable})` : ''}`, async (t) => {
  t.timeout(OVERALL_MS)
  const web3 = node('web3')
  await writeFile(join(web3.dir, 'input.yaml'), 'app: slow/tags/1.0.0\nclasses: [slow]\n')
  const rollout = app(['apply', '--json', '-I', 'web3'])
  // Once web3 reports on its run (the rollout is waiting for it), its mcollectived goes
  // away; the run itself carries on.
  await waitFor(
    'the rollout to wait for the run web3 started',
    async () => (/localpuppet: running \[.*"status", "\d{8}T/.test(await readFile(join(web3.dir, 'mcollective.log'), 'utf8')) ? true : undefined),
    120_000,
    100,
  )
  await stop(web3.daemon!)
  const answer = await rollout
  t.is(answer.exitCode, 1, answer.stderr)
  t.is(row(answer, 'web3').state, 'no answer')
  t.regex(row(answer, 'web3').message, /stopped answering while run \S+ was running/)
  t.deepEqual(answer.json.not_succeeded, ['web3'])

  // Broadcast discovery cannot know a node that is gone; a list of nodes can.
  const status = await app(['status', '--json', '--nodes', join(base, 'nodes.txt')])
  t.is(status.exitCode, 1)
  t.deepEqual(status.json.no_answer, ['web3'])
  t.is(row(status, 'web3').state, 'no answer')
})
