import {createHash, generateKeyPairSync} from 'node:crypto'
import {mkdir, readFile, readdir, writeFile} from 'node:fs/promises'
import {type IncomingMessage, type ServerResponse, createServer} from 'node:http'
import {join} from 'node:path'
import {gzipSync} from 'node:zlib'

import test, {type ExecutionContext} from 'ava'

import {signIndex} from '../../../src/lib/archive/signature.js'
import {LocalpuppetError} from '../../../src/lib/errors.js'
import {type RepositoryIndex, serializeRepositoryIndex} from '../../../src/lib/repository/repository-index.js'
import {fetchReleases} from '../../../src/lib/source/fetch.js'
import {tempDir} from '../../helpers/temp.js'

const {privateKey, publicKey} = generateKeyPairSync('ed25519')
const index = (version: number, expires = '2099-01-01T00:00:00.000Z'): RepositoryIndex => ({format: 1, repository: 'a'.repeat(32), version, expires, apps: {}})

/**
 * A static web server as nginx is for these files: ETag and Last-Modified on each, 304 when
 * a request's If-None-Match names the file's ETag, gzip when asked. `hostile` answers first.
 */
async function server(t: ExecutionContext, files: Map<string, Buffer>, hostile?: (req: IncomingMessage, res: ServerResponse) => boolean) {
  const requests: Array<{path: string; ifNoneMatch?: string; acceptEncoding?: string; status: number}> = []
  const http = createServer((req, res) => {
    const path = req.url!.slice(1)
    const seen = {path, ifNoneMatch: req.headers['if-none-match'], acceptEncoding: req.headers['accept-encoding'], status: 0}
    requests.push(seen)
    if (hostile?.(req, res)) return
    const body = files.get(path)
    if (body === undefined) return void res.writeHead((seen.status = 404)).end()
    const etag = `"${createHash('sha256').update(body).digest('hex').slice(0, 16)}"`
    if (req.headers['if-none-match'] === etag) return void res.writeHead((seen.status = 304), {etag}).end()
    const gzip = /gzip/.test(req.headers['accept-encoding'] ?? '')
    const sent = gzip ? gzipSync(body) : body
    res.writeHead((seen.status = 200), {etag, 'last-modified': 'Sat, 28 Nov 2026 00:00:00 GMT', 'content-length': sent.length, ...(gzip ? {'content-encoding': 'gzip'} : {})})
    res.end(sent)
  })
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => http.close(() => resolve())))
  http.on('connection', (socket) => t.teardown(() => void socket.destroy()))
  return {url: `http://127.0.0.1:${(http.address() as {port: number}).port}`, requests}
}

function publish(files: Map<string, Buffer>, doc: RepositoryIndex) {
  const bytes = Buffer.from(serializeRepositoryIndex(doc))
  files.set('index.json', bytes)
  files.set('index.json.sig', signIndex(bytes, privateKey))
}

async function node(t: ExecutionContext) {
  const dir = await tempDir(t)
  const moduleDir = join(dir, 'modules')
  await mkdir(moduleDir, {mode: 0o755})
  const pub = join(dir, 'release.pub.pem')
  await writeFile(pub, publicKey.export({type: 'spki', format: 'pem'}))
  return {moduleDir, fetch: (url: string) => fetchReleases(url, [], {moduleDir, trust: [pub], trustDir: null})}
}

test('a tick where nothing changed is one conditional request answered 304: the kept copy is used, verified again; a new index is read whole, compressed', async (t) => {
  const files = new Map<string, Buffer>()
  publish(files, index(1))
  const {url, requests} = await server(t, files)
  const {moduleDir, fetch} = await node(t)

  const first = await fetch(url)
  t.is(first.indexUnchanged, false)
  t.is(first.indexVersion, 1)
  t.true(first.bytesRead! > 0)
  t.deepEqual(requests.map((r) => [r.path, r.ifNoneMatch, r.acceptEncoding, r.status]), [
    ['index.json', undefined, 'gzip', 200],
    ['index.json.sig', undefined, 'gzip', 200],
  ])
  t.true((await readdir(join(moduleDir, '.localpuppet'))).some((name) => name.startsWith('kept-index-')))

  requests.length = 0
  const tick = await fetch(url)
  t.is(tick.indexUnchanged, true)
  t.is(tick.indexVersion, 1)
  t.is(tick.bytesRead, 0)
  t.deepEqual(requests.map((r) => [r.path, r.status]), [['index.json', 304]])
  t.truthy(requests[0].ifNoneMatch)

  publish(files, index(2))
  requests.length = 0
  const next = await fetch(url)
  t.is(next.indexUnchanged, false)
  t.is(next.indexVersion, 2)
  t.deepEqual(requests.map((r) => [r.path, r.status]), [['index.json', 200], ['index.json.sig', 200]])
})

test('a 304 to a node holding no copy is refused (65), and so is one that would stand for a copy no longer the one accepted', async (t) => {
  const files = new Map<string, Buffer>()
  publish(files, index(1))
  let mode: 'always 304' | 'no validators' | 'static' = 'always 304'
  const {url} = await server(t, files, (req, res) => {
    if (mode === 'static') return false
    if (mode === 'always 304') {
      res.writeHead(304).end()
      return true
    }

    const body = files.get(req.url!.slice(1))!
    res.writeHead(200, {'content-length': body.length}).end(body)
    return true
  })
  const {moduleDir, fetch} = await node(t)
  const refused = await t.throwsAsync(fetch(url))
  t.is((refused as LocalpuppetError).exitCode, 65)
  t.regex(refused!.message, /index\.json: 304 Not Modified, though this node named no copy it holds; refused/)
  t.deepEqual(await readdir(moduleDir).then((names) => names.filter((n) => n !== '.localpuppet')), [])

  // The node accepts version 1 and keeps it; then version 2 from the server without validators (nothing kept of it).
  mode = 'static'
  await fetch(url)
  publish(files, index(2))
  mode = 'no validators'
  t.is((await fetch(url)).indexVersion, 2)
  // Now answering 304 to anything: no copy of version 2 is kept, so no conditional request, and no 304 believed.
  mode = 'always 304'
  const replay = await t.throwsAsync(fetch(url))
  t.is((replay as LocalpuppetError).exitCode, 65)
  t.regex(replay!.message, /304 Not Modified, though this node named no copy it holds/)
})

test('an expired index is refused on a 304 too: the kept copy is judged against now', async (t) => {
  const files = new Map<string, Buffer>()
  publish(files, index(1))
  const {url, requests} = await server(t, files)
  const {moduleDir, fetch} = await node(t)
  t.is((await fetch(url)).indexVersion, 1)
  // The same version kept as it would be once its expiry passed (the clock is not waited for): signed, of the version accepted.
  const dir = join(moduleDir, '.localpuppet')
  const name = (await readdir(dir)).find((n) => n.startsWith('kept-index-'))!
  const head = JSON.parse((await readFile(join(dir, name), 'utf8')).split('\n')[0])
  const expired = Buffer.from(serializeRepositoryIndex(index(1, '2026-01-01T00:00:00.000Z')))
  await writeFile(join(dir, name), Buffer.concat([Buffer.from(JSON.stringify({...head, signature: signIndex(expired, privateKey).toString('base64')}) + '\n'), expired]))
  requests.length = 0
  const refused = await t.throwsAsync(fetch(url))
  t.is((refused as LocalpuppetError).exitCode, 65)
  t.regex(refused!.message, /index version 1 of .* expired at 2026-01-01T00:00:00.000Z/)
  t.deepEqual(requests.map((r) => r.status), [304])
})

test('a gzip bomb is refused like an oversized answer (65), bounded as it inflates; a Content-Encoding not asked for is refused (65)', async (t) => {
  const files = new Map<string, Buffer>()
  publish(files, index(1))
  const bomb = gzipSync(Buffer.alloc(64 * 1024 * 1024), {level: 9})
  let coding = 'gzip'
  const {url} = await server(t, files, (req, res) => {
    if (req.url !== '/index.json') return false
    res.writeHead(200, {'content-encoding': coding, 'content-length': bomb.length}).end(bomb)
    return true
  })
  const {fetch} = await node(t)
  t.true(bomb.length < 100 * 1024)
  const refused = await t.throwsAsync(fetch(url))
  t.is((refused as LocalpuppetError).exitCode, 65)
  t.regex(refused!.message, /index\.json: larger than 16777216 bytes; refused/)

  coding = 'br'
  const other = await t.throwsAsync(fetch(url))
  t.is((other as LocalpuppetError).exitCode, 65)
  t.regex(other!.message, /Content-Encoding br, which was not asked for; refused/)
})

test('on a 304 the kept copy is verified with the keys trusted now: one no longer trusted is refused (65), after the index is asked for again whole', async (t) => {
  const files = new Map<string, Buffer>()
  publish(files, index(1))
  const {url, requests} = await server(t, files)
  const {moduleDir, fetch} = await node(t)
  t.is((await fetch(url)).indexVersion, 1)
  const other = generateKeyPairSync('ed25519').publicKey
  const otherPub = join(moduleDir, '..', 'other.pub.pem')
  await writeFile(otherPub, other.export({type: 'spki', format: 'pem'}))
  requests.length = 0
  const refused = await t.throwsAsync(fetchReleases(url, [], {moduleDir, trust: [otherPub], trustDir: null}))
  t.is((refused as LocalpuppetError).exitCode, 65)
  t.regex(refused!.message, /does not verify with any trusted key/)
  t.deepEqual(requests.map((r) => [r.path, r.status]), [['index.json', 304], ['index.json', 200], ['index.json.sig', 200]])
})

test('gzip that does not decode is refused (65)', async (t) => {
  const files = new Map<string, Buffer>()
  publish(files, index(1))
  const {url} = await server(t, files, (req, res) => {
    if (req.url !== '/index.json') return false
    res.writeHead(200, {'content-encoding': 'gzip', 'content-length': 20}).end(Buffer.alloc(20, 7))
    return true
  })
  const {fetch} = await node(t)
  const refused = await t.throwsAsync(fetch(url))
  t.is((refused as LocalpuppetError).exitCode, 65)
  t.regex(refused!.message, /index\.json: gzip that does not decode/)
})
