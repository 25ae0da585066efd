import {spawn} from 'node:child_process'
import {closeSync, openSync} from 'node:fs'
import {appendFile, copyFile, cp, mkdir, mkdtemp, readFile, readdir, rm, symlink, writeFile} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'

import {execa} from 'execa'

import {BIN, FIXTURES, REPO, isolatePuppet} from './cli.js'
import {freePort, portOpen} from './net.js'
import {needPackages} from './packages.js'
import {writeTree} from './temp.js'

/*
 * A real MCollective fleet on 127.0.0.1, for the fleet tests and the fleet benchmark:
 * RabbitMQ with STOMP (its own epmd, ports, HOME and data directory), one mcollectived per
 * node, each with its own module dir, state dir and Puppet dirs, and the mco client, all
 * driving the localpuppet agent and the `mco localpuppet` application in
 * integrations/mcollective/. Every process started here is stopped by its PID (each is
 * the leader of its own process group) in stopFleet, and on exit if that never ran.
 */

/** Set when the fleet starts: everything after must be done by then. */
export let deadline = Number.POSITIVE_INFINITY
const RABBITMQ_SERVER = '/usr/lib/rabbitmq/bin/rabbitmq-server'
const MCOLLECTIVED = '/usr/sbin/mcollectived'
export const MCO = '/usr/bin/mco'
const EPMD = '/usr/bin/epmd'
/** What the fleet starts: RabbitMQ (and Erlang's epmd), mcollectived, mco, and nginx for a release repository. */
const PACKAGES = ['rabbitmq-server', 'erlang-base', 'mcollective', 'mcollective-client', 'nginx-light']
/** The fleet the e2e tests start, whatever reaches it: [name, role, the port its input gives foo]. */
export const FIVE_NODES = [
  ['db1', 'db', 5432],
  ['db2', 'db', 5433],
  ['web1', 'web', 8081],
  ['web2', 'web', 8082],
  ['web3', 'web', 8083],
] as const
export const RUN_ID = /^\d{8}T\d{6}\.\d{3}Z-[0-9a-f]{4}$/

export interface Node {
  name: string
  role: 'web' | 'db'
  port: number
  dir: string
  state: string
  daemon?: Started
}

export interface Reply {
  sender: string
  statuscode: number
  statusmsg: string
  data: Record<string, any>
}

export interface Started {
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
export let base = ''
export const nodes: Node[] = []

/** Installs what is missing when we are root (bin/setup --tests does the same); otherwise says why the fleet cannot run. */
export async function missingPackages(): Promise<string | undefined> {
  return needPackages(PACKAGES)
}


export function remaining(): number {
  const left = deadline - Date.now()
  if (left <= 0) throw new Error(`the MCollective fleet test ran out of its time`)
  return left
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

export async function exited(entry: Started, ms: number): Promise<boolean> {
  return Promise.race([entry.exit.then(() => true), sleep(ms).then(() => false)])
}

/** SIGTERM to the process group, SIGKILL if it lingers; the group id is the PID we started. */
export async function stop(entry: Started): Promise<void> {
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

export async function waitFor<T>(what: string, probe: () => Promise<T | undefined>, limitMs: number, everyMs = 250): Promise<T> {
  const until = Math.min(Date.now() + limitMs, deadline)
  for (;;) {
    const value = await probe()
    if (value !== undefined) return value
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`)
    await sleep(everyMs)
  }
}

export async function tail(file: string): Promise<string> {
  return (await readFile(file, 'utf8').catch(() => '')).split('\n').slice(-15).join('\n')
}

export const clientConfig = () => join(base, 'client.cfg')

/** `mco rpc localpuppet ACTION ...` with --json: mco's exit code and every node's reply, sorted by sender. */
export async function rpc(action: string, args: string[], discoverySeconds = 1): Promise<{exitCode: number; replies: Reply[]; stderr: string}> {
  const result = await execa(MCO, ['rpc', 'localpuppet', action, ...args, '--json', '--dt', String(discoverySeconds), '--config', clientConfig()], {
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

/** The operator's own state directory (rollout records, the remembered fleet), apart from every node's. */
export const operatorState = () => join(base, 'operator')

/** What the operator's commands run with: mco's HOME, the operator's state dir, and this checkout's localpuppet for `mco localpuppet`. */
const operatorEnv = () => ({HOME: join(base, 'home'), LOCALPUPPET_STATE_DIR: operatorState(), LOCALPUPPET_BIN: BIN, FORCE_COLOR: '0'})

function parsed(result: {exitCode?: number; stdout: unknown; stderr: unknown}): {exitCode: number; stdout: string; stderr: string; json: any} {
  let json: any
  try {
    json = JSON.parse(String(result.stdout))
  } catch {}

  return {exitCode: result.exitCode ?? -1, stdout: String(result.stdout), stderr: String(result.stderr), json}
}

/** `mco localpuppet ARGS...`: its exit code, its output, and its JSON when asked for. */
export async function app(args: string[]): Promise<{exitCode: number; stdout: string; stderr: string; json: any}> {
  const result = await execa(MCO, ['localpuppet', ...args, '--dt', '1', '--config', clientConfig()], {
    reject: false,
    stdin: 'ignore',
    timeout: Math.min(240_000, remaining()),
    env: operatorEnv(),
  })
  return parsed(result)
}

/** `localpuppet ARGS... --mco-config client.cfg --dt 1` as the operator runs it (rollout, fleet status), started: the caller awaits it or kills it. */
export function startOperator(args: string[]) {
  const fleetArgs = args[0] === 'rollout' && ['list', 'show', 'revert'].includes(args[1]) ? [] : args.includes('--resume') ? [] : ['--mco-config', clientConfig(), '--dt', '1']
  return execa('node', [BIN, ...args, ...fleetArgs], {reject: false, stdin: 'ignore', timeout: Math.min(300_000, remaining()), env: operatorEnv()})
}

export async function operator(args: string[]): Promise<{exitCode: number; stdout: string; stderr: string; json: any}> {
  return parsed(await startOperator(args))
}

/** The row of one node in an `mco localpuppet ... --json` answer. */
export const row = (answer: {json: any}, node: string) => answer.json?.nodes?.find((entry: {node: string}) => entry.node === node)

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

/** The node's own settings: its node configuration (LOCALPUPPET_CONFIG for the agent). */
export async function nodeSettings(node: Node): Promise<string> {
  const config = join(node.dir, 'config.yaml')
  const settings = {
    module_dir: join(node.dir, 'modules'),
    state_dir: node.state,
    input: join(node.dir, 'input.yaml'),
    // Puppet's own state stays in the node's directory.
    puppet_args: isolatePuppet(node.dir),
  }
  await writeFile(config, Object.entries(settings).map(([key, value]) => `${key}: ${JSON.stringify(value)}`).join('\n') + '\n')
  return config
}

/**
 * A node's own files, whatever transport reaches it: the demo modules and a slow release in
 * its module dir, its input (foo 1.3.0) and facts, and its node configuration (returned).
 */
export async function prepareNode(node: Node): Promise<string> {
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
  return nodeSettings(node)
}

async function startNode(node: Node, stompPort: number): Promise<void> {
  const settings = await prepareNode(node)
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
  await appendFile(pluginConfig, ['', `executable = ${BIN}`, `config = ${settings}`, ''].join('\n'))
  await startDaemon(node)
}

export async function startDaemon(node: Node): Promise<void> {
  node.daemon = await start(`mcollectived-${node.name}`, MCOLLECTIVED, ['--config', join(node.dir, 'server.cfg'), '--no-daemonize'], {HOME: join(base, 'home')})
}

/**
 * A node's daemon, stopped by a test, started again and answering: a daemon that has not
 * answered within a minute (a loaded machine, a broker slow to bind its queue) is started
 * once more, and one that never answers fails with the ends of its logs, not a bare timeout.
 */
export async function restartDaemon(node: Node): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    if (node.daemon) await stop(node.daemon)
    await startDaemon(node)
    const until = Math.min(Date.now() + 60_000, deadline)
    while (Date.now() < until) {
      if ((await rpc('status', ['-I', node.name], 5)).replies.length > 0) return
      if (await exited(node.daemon!, 1000)) break
    }

    if (attempt === 2) {
      const logs = [join(base, `mcollectived-${node.name}.out`), join(node.dir, 'mcollective.log')]
      const ends = await Promise.all(logs.map(async (file) => `${file}:\n${await tail(file)}`))
      throw new Error(`${node.name}'s mcollectived, started twice, never answered:\n${ends.join('\n')}`)
    }
  }
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

/** Waits until discovery finds exactly the fleet. */
export async function everyoneAnswers(): Promise<void> {
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

/** Starts the broker and one mcollectived per [name, role, port]; resolves once discovery finds them all. */
export async function startFleet(spec: ReadonlyArray<readonly [string, 'web' | 'db', number]>, overallMs: number): Promise<void> {
  deadline = Date.now() + overallMs
  base = await mkdtemp(join(tmpdir(), 'localpuppet-mco-'))
  await mkdir(join(base, 'home'))
  await mkdir(join(base, 'lib'))
  // A libdir holds mcollective/{agent,application,facts}/*.rb: integrations/mcollective is laid out as that mcollective/.
  await symlink(join(REPO, 'integrations', 'mcollective'), join(base, 'lib', 'mcollective'))
  for (const [name, role, port] of spec) nodes.push({name, role, port, dir: join(base, name), state: join(base, name, 'state')})

  const stompPort = await startBroker()
  await writeFile(clientConfig(), [brokerSettings(stompPort), 'logger_type = console', 'loglevel = warn', ''].join('\n'))
  for (const node of nodes) await startNode(node, stompPort)
  await writeFile(nodesFile(), nodes.map((node) => node.name).join('\n') + '\n')
  await everyoneAnswers()
}

/** Stops every run and process the fleet started, and removes its directory. */
export async function stopFleet(): Promise<void> {
  await stopDetachedRuns()
  for (const entry of [...started].reverse()) await stop(entry)
  started.length = 0
  if (base) await rm(base, {recursive: true, force: true})
}

/** A file naming every node, for `--nodes` discovery. */
export const nodesFile = () => join(base, 'nodes.txt')
export const node = (name: string) => nodes.find((entry) => entry.name === name)!
export const runIds = async (name: string) => (await readdir(join(node(name).state, 'runs')).catch(() => [] as string[])).sort()
