import {mkdtemp, readdir, rm} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'

import type {ExecutionContext} from 'ava'
import test from 'ava'

import {type PuppetDbCommand, PuppetDbClient} from '../../../src/lib/puppetdb/client.js'
import {flushSpool, spoolCommands, spoolDir, spoolState} from '../../../src/lib/puppetdb/spool.js'
import {head, hostileServer, pour} from '../../helpers/hostile-server.js'
import {testServer} from '../../helpers/repository.js'

/*
 * The node's spool of PuppetDB commands: kept in order while PuppetDB is away, each sent once
 * when it is back, bounded; and PuppetDB's answers as hostile input (slow, huge, lying).
 */

async function stateDir(t: ExecutionContext): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'lp-spool-'))
  t.teardown(() => rm(dir, {recursive: true, force: true}))
  return dir
}

const command = (kind: PuppetDbCommand['command'], n: number): PuppetDbCommand => ({
  command: kind,
  version: kind === 'store report' ? 8 : kind === 'replace facts' ? 5 : 9,
  certname: 'web1',
  producerTimestamp: new Date(Date.UTC(2026, 0, 1, 0, 0, n)).toISOString(),
  payload: {n},
})

/** A stand-in PuppetDB's command endpoint: records each command's n; answers with `status` while `up()` says no. */
async function puppetdb(t: ExecutionContext) {
  const received: Array<{command: string; n: number}> = []
  let accepting = false
  const server = await testServer('/nonexistent', async (req, res) => {
    let body = ''
    for await (const chunk of req) body += chunk
    if (!accepting) {
      res.writeHead(503)
      res.end('shutting down')
      return true
    }

    const params = new URL(req.url ?? '/', 'http://x').searchParams
    received.push({command: params.get('command')!, n: (JSON.parse(body) as {n: number}).n})
    res.writeHead(200, {'content-type': 'application/json'})
    res.end(JSON.stringify({uuid: `u${received.length}`}))
    return true
  })
  t.teardown(() => server.close())
  return {url: server.url, received, accept: () => (accepting = true)}
}

const client = (url: string) => new PuppetDbClient({url, ca: null, cert: null, key: null})
const quick = {deadlineMs: 5000, timeoutMs: 2000}

test('commands spooled while PuppetDB refuses are sent once it is back, in order, each once; facts and catalogs only the newest', async (t) => {
  const dir = await stateDir(t)
  const server = await puppetdb(t)
  for (const n of [1, 2, 3]) {
    await spoolCommands(dir, [command('replace facts', n), command('replace catalog', n), command('store report', n)])
    const refused = await flushSpool(dir, client(server.url), quick)
    t.regex(refused.error ?? '', /HTTP 503: shutting down/)
  }

  t.deepEqual(await spoolState(dir), {pending: 5, dropped: 0})
  server.accept()
  const flushed = await flushSpool(dir, client(server.url), quick)
  t.is(flushed.error, null)
  t.deepEqual(server.received, [
    {command: 'store_report', n: 1},
    {command: 'store_report', n: 2},
    {command: 'replace_facts', n: 3},
    {command: 'replace_catalog', n: 3},
    {command: 'store_report', n: 3},
  ])
  // A second flush sends nothing again.
  const again = await flushSpool(dir, client(server.url), quick)
  t.is(again.sent.length, 0)
  t.is(server.received.length, 5)
  t.deepEqual((await readdir(spoolDir(dir))).filter((name) => name.endsWith('.json')), [])
})

test('past its bound the spool drops its oldest reports, and counts them', async (t) => {
  const dir = await stateDir(t)
  for (const n of [1, 2, 3, 4]) await spoolCommands(dir, [command('replace facts', n), command('store report', n)], {count: 3, bytes: 1024 * 1024})
  t.deepEqual(await spoolState(dir), {pending: 3, dropped: 2})
  const server = await puppetdb(t)
  server.accept()
  await flushSpool(dir, client(server.url), quick)
  t.deepEqual(server.received, [
    {command: 'store_report', n: 3},
    {command: 'replace_facts', n: 4},
    {command: 'store_report', n: 4},
  ])
})

test('a PuppetDB that never answers holds the flush no longer than its deadline, and nothing is lost', async (t) => {
  const dir = await stateDir(t)
  await spoolCommands(dir, [command('store report', 1)])
  const silent = await hostileServer(() => {})
  t.teardown(() => silent.close())
  const flushed = await flushSpool(dir, client(silent.url), {deadlineMs: 1500, timeoutMs: 1000})
  t.truthy(flushed.error)
  t.is(flushed.pending, 1)
})

test('a huge answer is refused without being read whole, and the command stays spooled', async (t) => {
  const dir = await stateDir(t)
  await spoolCommands(dir, [command('store report', 1)])
  const huge = await hostileServer((_path, socket) => {
    socket.write(head(200, {'content-type': 'application/json'}))
    pour(socket)
  })
  t.teardown(() => huge.close())
  const flushed = await flushSpool(dir, client(huge.url), quick)
  t.regex(flushed.error ?? '', /answer larger than 65536 bytes/)
  t.is(flushed.pending, 1)
})

test('an answer that is not PuppetDB\'s acknowledgement (200 without a uuid) does not count as sent', async (t) => {
  const dir = await stateDir(t)
  await spoolCommands(dir, [command('store report', 1)])
  const liar = await testServer('/nonexistent', async (_req, res) => {
    res.writeHead(200, {'content-type': 'application/json'})
    res.end('{"ok": true, "\\u001b[2J": 1}')
    return true
  })
  t.teardown(() => liar.close())
  const flushed = await flushSpool(dir, client(liar.url), quick)
  t.regex(flushed.error ?? '', /not PuppetDB's answer \(no command uuid\)/)
  t.is(flushed.pending, 1)
})

test('query: rows that are not a list of objects are refused (69), naming the server', async (t) => {
  const liar = await testServer('/nonexistent', async (_req, res) => {
    res.writeHead(200, {'content-type': 'application/json'})
    res.end('[1, 2]')
    return true
  })
  t.teardown(() => liar.close())
  const error = await t.throwsAsync(client(liar.url).query('nodes {}'))
  t.is((error as {exitCode?: number}).exitCode, 69)
  t.regex(error!.message, /^puppetdb http:\/\/127\.0\.0\.1:\d+\/?: query nodes \{\}: not PuppetDB's answer/)
})

test("a newer run spooling its facts while a flush sends the older ones neither fails the flush nor counts anything dropped", async (t) => {
  const dir = await stateDir(t)
  await spoolCommands(dir, [command('replace facts', 1), command('store report', 1)])
  const sent: number[] = []
  let replaced = false
  const racing = {
    async submit(spooled: PuppetDbCommand) {
      sent.push((spooled.payload as {n: number}).n)
      // The next run spools its facts (removing the ones being sent) before PuppetDB answered.
      if (!replaced) {
        replaced = true
        await spoolCommands(dir, [command('replace facts', 2)])
      }

      return 'uuid'
    },
  } as unknown as PuppetDbClient
  const flushed = await flushSpool(dir, racing, quick)
  t.is(flushed.error, null)
  t.is(flushed.dropped, 0)
  t.deepEqual(sent, [1, 1])
  // The newer facts wait for the next flush.
  t.deepEqual(await spoolState(dir), {pending: 1, dropped: 0})
})

test('a spooled file that is JSON but no command (damaged by hand) is dropped and counted, and does not block the commands after it', async (t) => {
  const dir = await stateDir(t)
  await spoolCommands(dir, [command('store report', 1)])
  const {writeFile} = await import('node:fs/promises')
  // Older than the good one: first in line.
  await writeFile(join(spoolDir(dir), '000000000000001-1-0000-report.json'), 'null\n')
  await writeFile(join(spoolDir(dir), '000000000000002-1-0000-report.json'), '{"command": "store report"}\n')
  const server = await puppetdb(t)
  server.accept()
  const flushed = await flushSpool(dir, client(server.url), quick)
  t.is(flushed.error, null)
  t.deepEqual(server.received, [{command: 'store_report', n: 1}])
  t.deepEqual(await spoolState(dir), {pending: 0, dropped: 2})
})

test('a puppetdb_key others can read is refused (77) naming the setting and the file, before anything is sent', async (t) => {
  const dir = await stateDir(t)
  const {selfSignedCertificate} = await import('../../helpers/tls.js')
  const {chmod} = await import('node:fs/promises')
  const {key, cert} = await selfSignedCertificate(dir)
  await chmod(key, 0o644)
  const server = await puppetdb(t)
  server.accept()
  const leaky = new PuppetDbClient({url: server.url.replace('http:', 'https:'), ca: cert, cert, key})
  const error = await t.throwsAsync(leaky.query('nodes {}'))
  t.is((error as {exitCode?: number}).exitCode, 77)
  t.regex(error!.message, /^puppetdb_key .*key\.pem: mode 0644 lets others read it/)
  t.deepEqual(server.received, [])
})

test('a spool directory others can write is refused (77) before anything in it is sent; a spooled file others can write or a link is dropped and counted, never sent', async (t) => {
  const {chmod, symlink, writeFile} = await import('node:fs/promises')
  const server = await puppetdb(t)
  server.accept()
  const open = await stateDir(t)
  await spoolCommands(open, [command('store report', 1)])
  await chmod(spoolDir(open), 0o777)
  const error = await t.throwsAsync(flushSpool(open, client(server.url), quick))
  t.is((error as {exitCode?: number}).exitCode, 77)
  t.regex(error!.message, /puppetdb-spool/)
  await t.throwsAsync(spoolCommands(open, [command('store report', 2)]), {message: /puppetdb-spool/})
  t.deepEqual(server.received, [])

  const dir = await stateDir(t)
  await spoolCommands(dir, [command('store report', 1)])
  const forged = join(spoolDir(dir), '000000000000001-1-0000-report.json')
  await writeFile(forged, JSON.stringify(command('store report', 66)) + '\n')
  await chmod(forged, 0o666)
  const elsewhere = join(dir, 'elsewhere.json')
  await writeFile(elsewhere, JSON.stringify(command('store report', 67)) + '\n', {mode: 0o600})
  await symlink(elsewhere, join(spoolDir(dir), '000000000000002-1-0000-report.json'))
  const flushed = await flushSpool(dir, client(server.url), quick)
  t.is(flushed.error, null)
  t.deepEqual(server.received, [{command: 'store_report', n: 1}])
  t.deepEqual(await spoolState(dir), {pending: 0, dropped: 2})
})

test('a command PuppetDB refuses for itself (400) does not hold the later ones back for ever: once the next is accepted it is dropped, counted and said; a PuppetDB refusing every command loses none', async (t) => {
  const dir = await stateDir(t)
  for (const n of [1, 2, 3]) await spoolCommands(dir, [command('store report', n)])
  const received: number[] = []
  let refuseAll = true
  const server = await testServer('/nonexistent', async (req, res) => {
    let body = ''
    for await (const chunk of req) body += chunk
    const {n} = JSON.parse(body) as {n: number}
    if (refuseAll || n === 1) {
      res.writeHead(400)
      res.end('Supported versions of store report are 8')
      return true
    }

    received.push(n)
    res.writeHead(200, {'content-type': 'application/json'})
    res.end(JSON.stringify({uuid: `u${n}`}))
    return true
  })
  t.teardown(() => server.close())
  const stuck = await flushSpool(dir, client(server.url), quick)
  t.regex(stuck.error ?? '', /HTTP 400/)
  t.deepEqual(await spoolState(dir), {pending: 3, dropped: 0})
  refuseAll = false
  const flushed = await flushSpool(dir, client(server.url), quick)
  t.is(flushed.error, null)
  t.deepEqual(received, [2, 3])
  t.is(flushed.refused.length, 1)
  t.regex(flushed.refused[0], /store report of web1 at 2026-01-01T00:00:01\.000Z: .*HTTP 400: Supported versions/)
  t.deepEqual(await spoolState(dir), {pending: 0, dropped: 1})
})

test("what a run stopped midway through spooling left (writeFileAtomic's temporary file of a process gone) is removed by the next flush, so crashes do not grow the spool past its bound", async (t) => {
  const dir = await stateDir(t)
  await spoolCommands(dir, [command('store report', 1)])
  const {writeFile} = await import('node:fs/promises')
  const gone = 2 ** 22 + 12_345
  const left = `.000000000000001-${gone}-0000-report.json.${gone}.0123abcd.tmp`
  await writeFile(join(spoolDir(dir), left), Buffer.alloc(4096))
  const server = await puppetdb(t)
  server.accept()
  await flushSpool(dir, client(server.url), quick)
  t.deepEqual(server.received, [{command: 'store_report', n: 1}])
  t.false((await readdir(spoolDir(dir))).includes(left))
})
