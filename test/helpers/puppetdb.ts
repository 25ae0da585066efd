import {spawn} from 'node:child_process'
import {chown, copyFile, mkdir, mkdtemp, readFile, rm, writeFile} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import https from 'node:https'
import {join} from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'

import {execa} from 'execa'

import {readManual} from './manual.js'
import {freePort, portOpen} from './net.js'

/*
 * A real PuppetDB 7 (Debian's puppetdb) on a real PostgreSQL 15, both on 127.0.0.1 in the
 * test's own directories, stopped by PID. The certificates are made by the README's openssl
 * commands (PuppetDB chapter), run as written with the names put in.
 *
 * With `root` (a Debian 13 chroot with trixie's puppetdb and postgresql-17, as
 * bin/puppetdb8 builds), the same PuppetDB 8.4.1 on PostgreSQL 17 and Java 21 a Debian 13
 * operator gets: PostgreSQL and the JVM run inside it (a private mount namespace with /proc,
 * /dev and the test's directories bound in at their own paths, so every path is the same
 * inside and out), on the host's loopback.
 */

const PUPPETDB_JAR = '/usr/share/puppetdb/puppetdb.jar'

/** Where PuppetDB's programs run: the host's Debian 12, or a chroot (the command made to run there). */
function place(root: string | undefined, binds: string[]) {
  const pgBin = root ? '/usr/lib/postgresql/17/bin' : '/usr/lib/postgresql/15/bin'
  const wrap = (command: string, args: string[]): [string, string[]] =>
    root
      ? [
          'unshare',
          [
            '--mount',
            '--propagation',
            'private',
            '--',
            '/bin/sh',
            '-euc',
            'root=$1; shift; for bind in $BINDS; do mkdir -p "$root$bind"; mount --bind "$bind" "$root$bind"; done; mount -t proc proc "$root/proc"; mount --rbind /dev "$root/dev"; exec chroot "$root" "$@"',
            'puppetdb-chroot',
            root,
            command,
            ...args,
          ],
        ]
      : [command, args]
  return {pgBin, wrap, env: {BINDS: binds.join(' ')}, file: (path: string) => (root ? join(root, path) : path)}
}

export interface PuppetDbServer {
  url: string
  ca: string
  cert: string
  key: string
  pid: number
  /** How long PostgreSQL and PuppetDB took to be ready (ms). */
  startMs: number
  /** PuppetDB's own word on its version (/pdb/meta/v1/version), e.g. 7.12.1 or 8.4.1. */
  version: string
  /** The lines of PuppetDB's log at WARN or ERROR so far (the log goes with the test's directory). */
  warnings(): Promise<string[]>
  /** SIGSTOP / SIGCONT PuppetDB's JVM: a PuppetDB that stops answering mid-conversation. */
  pause(): void
  resume(): void
  stop(): Promise<void>
}

/** The README's certificate commands, as written, with PuppetDB's name and the node's put in. */
export async function readmeCertificateCommands(serverName: string, nodeName: string): Promise<string> {
  const readme = await readManual()
  const start = readme.indexOf("# once, on the operator's machine: the CA")
  const end = readme.indexOf('```', start)
  if (start === -1 || end === -1) throw new Error("README: the PuppetDB chapter's openssl commands are gone")
  return readme.slice(start, end).replaceAll('puppetdb.example.com', serverName).replaceAll('web1.example.com', nodeName).replaceAll('web1', nodeName)
}

async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs: number, alive: () => boolean): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    if (await check()) return
    if (!alive()) throw new Error(`${what}: the process ended`)
    await sleep(500)
  }

  throw new Error(`${what}: not ready within ${timeoutMs / 1000} s`)
}

/** Starts PostgreSQL and PuppetDB in `dir` (as root, PostgreSQL runs as the postgres user). */
export async function startPuppetDb(dir: string, nodeName: string, {root}: {root?: string} = {}): Promise<PuppetDbServer> {
  const began = Date.now()
  const certs = join(dir, 'certs')
  await mkdir(certs, {recursive: true})
  await execa('sh', ['-e', '-c', await readmeCertificateCommands('localhost', nodeName)], {cwd: certs})

  // PostgreSQL runs as postgres, who cannot reach into the test's 0700 directory: a directory of its own in /tmp.
  const pg = await mkdtemp(join(tmpdir(), 'localpuppet-pg-'))
  const at = place(root, [pg, dir])
  await chown(pg, ...(await ids('postgres', root)))
  const asPostgres = (command: string, args: string[]) => at.wrap('setpriv', ['--reuid=postgres', '--regid=postgres', '--clear-groups', join(at.pgBin, command), ...args])
  await execa(...asPostgres('initdb', ['-D', join(pg, 'data'), '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--locale=C.UTF-8']), {env: at.env})
  const pgPort = await freePort()
  const postgres = spawn(...asPostgres('postgres', ['-D', join(pg, 'data'), '-k', pg, '-p', String(pgPort), '-c', 'listen_addresses=127.0.0.1', '-c', 'fsync=off']), {stdio: 'ignore', env: {...process.env, ...at.env}})
  const pgAlive = () => postgres.exitCode === null
  let java: ReturnType<typeof spawn> | undefined
  const stopAll = async () => {
    for (const child of [java, postgres]) {
      if (!child || child.exitCode !== null || child.signalCode !== null) continue
      child.kill('SIGCONT')
      child.kill('SIGTERM')
      const killed = setTimeout(() => child.kill('SIGKILL'), 30_000)
      await new Promise((resolve) => child.once('exit', resolve))
      clearTimeout(killed)
    }

    await rm(pg, {recursive: true, force: true})
  }

  try {
    return await startPuppetDbOn(at, dir, certs, pgPort, pgAlive, (started) => (java = started), stopAll, began, nodeName)
  } catch (error) {
    await stopAll()
    throw error
  }
}

async function startPuppetDbOn(
  at: ReturnType<typeof place>,
  dir: string,
  certs: string,
  pgPort: number,
  pgAlive: () => boolean,
  started: (java: ReturnType<typeof spawn>) => void,
  stopAll: () => Promise<void>,
  began: number,
  nodeName: string,
): Promise<PuppetDbServer> {
  await waitFor('postgres', () => portOpen(pgPort), 60_000, pgAlive)
  const psql = (db: string, sql: string) => execa(...at.wrap(join(at.pgBin, 'psql'), ['-h', '127.0.0.1', '-p', String(pgPort), '-U', 'postgres', '-d', db, '-v', 'ON_ERROR_STOP=1', '-c', sql]), {env: at.env})
  // PostgreSQL takes a moment past opening its port to accept logins.
  await waitFor('postgres logins', () => psql('postgres', 'select 1').then(() => true, () => false), 30_000, pgAlive)
  await psql('postgres', "create user puppetdb password 'puppetdb'")
  await psql('postgres', 'create database puppetdb owner puppetdb')
  await psql('puppetdb', 'create extension pg_trgm')

  const conf = join(dir, 'conf.d')
  await mkdir(conf)
  await mkdir(join(dir, 'var'))
  const port = await freePort()
  await writeFile(join(conf, 'config.ini'), `[global]\nvardir = ${join(dir, 'var')}\nlogging-config = ${join(dir, 'logback.xml')}\n[command-processing]\nthreads = 1\n`)
  await writeFile(join(conf, 'database.ini'), `[database]\nsubname = //127.0.0.1:${pgPort}/puppetdb\nusername = puppetdb\npassword = puppetdb\n`)
  await writeFile(
    join(conf, 'jetty.ini'),
    `[jetty]\nssl-host = 127.0.0.1\nssl-port = ${port}\nssl-key = ${join(certs, 'puppetdb.key')}\nssl-cert = ${join(certs, 'puppetdb.pem')}\nssl-ca-cert = ${join(certs, 'ca.pem')}\nclient-auth = need\n`,
  )
  // Any certificate the CA signed may use the API: the fleet's CA is the allow list.
  await writeFile(join(conf, 'auth.conf'), 'authorization: {\n  version: 1\n  rules: [\n    { match-request: { path: "/", type: path }, allow: "*", sort-order: 500, name: "the fleet CA" }\n  ]\n}\n')
  await writeFile(
    join(dir, 'logback.xml'),
    `<configuration><appender name="F" class="ch.qos.logback.core.FileAppender"><file>${join(dir, 'puppetdb.log')}</file><encoder><pattern>%d %-5p [%c{2}] %m%n</pattern></encoder></appender><root level="info"><appender-ref ref="F"/></root></configuration>\n`,
  )
  await copyFile(at.file('/etc/puppetdb/bootstrap.cfg'), join(dir, 'bootstrap.cfg'))
  const java = spawn(
    ...at.wrap('java', ['-Xmx192m', '-XX:TieredStopAtLevel=1', '-Xshare:auto', '-cp', PUPPETDB_JAR, 'clojure.main', '-m', 'puppetlabs.puppetdb.core', 'services', '--config', conf, '--bootstrap-config', join(dir, 'bootstrap.cfg')]),
    {stdio: ['ignore', 'ignore', 'ignore'], env: {...process.env, ...at.env}},
  )
  started(java)
  const log = () => readFile(join(dir, 'puppetdb.log'), 'utf8').catch(() => '')
  // PuppetDB opens its port before it has migrated the database: ready is its own word.
  await waitFor('puppetdb', async () => (await log()).includes('PuppetDB finished starting'), 600_000, () => java.exitCode === null)
  const tls = {ca: await readFile(join(certs, 'ca.pem')), cert: await readFile(join(certs, `${nodeName}.pem`)), key: await readFile(join(certs, `${nodeName}.key`))}
  const version = await new Promise<string>((resolve, reject) => {
    https
      .get(`https://localhost:${port}/pdb/meta/v1/version`, {...tls, timeout: 30_000}, (response) => {
        let body = ''
        response.setEncoding('utf8').on('data', (chunk: string) => (body += chunk)).on('end', () => resolve(String((JSON.parse(body) as {version?: unknown}).version)))
      })
      .on('error', reject)
  })
  return {
    version,
    warnings: async () => (await log()).split('\n').filter((line) => / (WARN|ERROR) /.test(line)),
    url: `https://localhost:${port}`,
    ca: join(certs, 'ca.pem'),
    cert: join(certs, `${nodeName}.pem`),
    key: join(certs, `${nodeName}.key`),
    pid: java.pid!,
    startMs: Date.now() - began,
    pause: () => java.kill('SIGSTOP'),
    resume: () => java.kill('SIGCONT'),
    stop: stopAll,
  }
}

async function ids(user: string, root: string | undefined): Promise<[number, number]> {
  const id = (flag: string) => (root ? execa('chroot', [root, 'id', flag, user]) : execa('id', [flag, user]))
  const {stdout} = await id('-u')
  const {stdout: gid} = await id('-g')
  return [Number(stdout), Number(gid)]
}
