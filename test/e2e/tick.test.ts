// Issue 40: a node's timer tick where nothing was published costs one conditional request
// that Debian's nginx answers 304, headers only; a hostile server's 304 or gzip bomb is refused.
import {chmod, mkdir, readFile, writeFile} from 'node:fs/promises'
import {join} from 'node:path'
import {gzipSync} from 'node:zlib'

import test from 'ava'

import {cli, isolatePuppet, statusJson} from '../helpers/cli.js'
import {startNginx} from '../helpers/nginx.js'
import {keyPair, testServer} from '../helpers/repository.js'
import {tempDir, writeTree} from '../helpers/temp.js'

const WEB = {'web/tags/1.0.0/web/manifests/init.pp': 'class web(String $out) {\n  file { $out: content => "tick\\n" }\n}\n'}

/** `<dir>/repo`: web 1.0.0 and the input of node web1, signed. */
async function repository(dir: string, out: string) {
  await writeTree(join(dir, 'build'), WEB)
  const {key, pub} = await keyPair(dir, 'release')
  const archive = join(dir, 'web-1.0.0.tar.gz')
  const packed = await cli(['pack', 'web/tags/1.0.0', '--module-dir', join(dir, 'build'), '-o', archive, '--sign', key])
  if (packed.exitCode !== 0) throw new Error(packed.stderr)
  await writeTree(dir, {'git/nodes/web1.yaml': `app: web/tags/1.0.0\nclasses:\n  web:\n    out: ${out}\n`})
  const repo = join(dir, 'repo')
  const published = await cli(['publish', archive, '--inputs', join(dir, 'git/nodes'), '--repo', repo, '--sign', key])
  if (published.exitCode !== 0) throw new Error(published.stderr)
  return {repo, key, pub}
}

test('behind nginx, a second apply --fetch --if-changed tick reads the index as a 304 of headers only, and runs nothing; a new publish is read again', async (t) => {
  const dir = await tempDir(t)
  await chmod(dir, 0o755)
  const out = join(dir, 'out.txt')
  const {repo, key, pub} = await repository(dir, out)
  const nginx = await startNginx(repo, join(dir, 'nginx'), {requestLog: true, gzip: true})
  t.teardown(() => nginx.stop())
  const log = async () => (await readFile(join(dir, 'nginx/access.log'), 'utf8')).trim().split('\n').map((line) => line.split(' '))

  await mkdir(join(dir, 'node/etc'), {recursive: true, mode: 0o755})
  await mkdir(join(dir, 'modules'), {mode: 0o755})
  const config = join(dir, 'node/config.yaml')
  const settings = {module_dir: join(dir, 'modules'), state_dir: join(dir, 'state'), source: nginx.url, trust: pub, input: join(dir, 'node/etc/input.yaml'), input_from: 'repository', node_name: 'web1'}
  await writeFile(config, Object.entries(settings).map(([k, v]) => `${k}: ${JSON.stringify(v)}\n`).join(''))
  const env = {LOCALPUPPET_CONFIG: config}
  const apply = () => cli(['apply', '--fetch', '--if-changed', '--', ...isolatePuppet(dir)], {env})

  const first = await apply()
  t.is(first.exitCode, 0, first.stderr)
  t.is(await readFile(out, 'utf8'), 'tick\n')
  const before = (await log()).length

  const tick = await apply()
  t.is(tick.exitCode, 0, tick.stderr)
  t.is((await statusJson(join(dir, 'state'))).record.state, 'skipped')
  const requests = (await log()).slice(before)
  t.deepEqual(requests.map(([method, path, status]) => [method, path, status]), [['GET', '/index.json', '304']])
  // Headers only: nginx's $bytes_sent for the whole answer.
  t.true(Number(requests[0][3]) < 1024, requests[0][3])

  const fetched = await cli(['fetch', 'web/tags/1.0.0', '--json'], {env})
  t.is(fetched.exitCode, 0, fetched.stderr)
  t.like(JSON.parse(fetched.stdout), {indexUnchanged: true, bytesRead: 0, indexVersion: 1})

  // Published again (a re-signing: a new version): read whole, gzipped by nginx, and accepted.
  t.is((await cli(['publish', '--repo', repo, '--sign', key])).exitCode, 0)
  const mark = (await log()).length
  const renewed = await cli(['fetch', 'web/tags/1.0.0', '--json'], {env})
  t.is(renewed.exitCode, 0, renewed.stderr)
  t.like(JSON.parse(renewed.stdout), {indexUnchanged: false, indexVersion: 2})
  t.deepEqual((await log()).slice(mark).map(([, path, status]) => [path, status]), [['/index.json', '200'], ['/index.json.sig', '200']])
  t.true(JSON.parse(renewed.stdout).bytesRead < (await readFile(join(repo, 'index.json'))).length, 'the index came gzipped')
})

test('a server answering 304 to a node holding no copy, or a gzip bomb for the index, is refused (65) with nothing installed', async (t) => {
  const dir = await tempDir(t)
  const {repo, pub} = await repository(dir, join(dir, 'out.txt'))
  let answer: 'not modified' | 'bomb' = 'not modified'
  const bomb = gzipSync(Buffer.alloc(64 * 1024 * 1024))
  const server = await testServer(repo, (_req, res, path) => {
    if (path !== '/index.json') return false
    if (answer === 'not modified') res.writeHead(304).end()
    else res.writeHead(200, {'content-encoding': 'gzip', 'content-length': bomb.length}).end(bomb)
    return true
  })
  t.teardown(() => server.close())
  const modules = join(dir, 'modules')
  await mkdir(modules)
  const fetch = () => cli(['fetch', 'web/tags/1.0.0', '--source', server.url, '--trust', pub, '--module-dir', modules])

  const frozen = await fetch()
  t.is(frozen.exitCode, 65, frozen.stderr)
  t.regex(frozen.stderr, /index\.json: 304 Not Modified, though this node named no copy it holds; refused/)
  answer = 'bomb'
  const inflated = await fetch()
  t.is(inflated.exitCode, 65, inflated.stderr)
  t.regex(inflated.stderr, /index\.json: larger than 16777216 bytes; refused/)
  t.false(await readFile(join(modules, 'web/tags/1.0.0/web/manifests/init.pp')).then(() => true, () => false))
})
