// Issue 25: a warm fetch over http (every release already installed) reads the signed index
// and nothing else, and still refuses a bad index with the README's exit codes, leaving what
// is installed as it was.
import {mkdir, readFile, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import test, {type ExecutionContext} from 'ava'

import {cli} from '../helpers/cli.js'
import {type Handler, copyRepository, sendMegabytes, sharedDemoRepository, testServer} from '../helpers/repository.js'
import {tempDir} from '../helpers/temp.js'

let base: Awaited<ReturnType<typeof sharedDemoRepository>>
test.before(async () => {
  base = await sharedDemoRepository('localpuppet-fetch-warm-')
})
test.after.always(() => base?.remove())

/** A module directory that fetched foo@^1.4 from a served copy of the repository; `hostile` answers later requests once armed. */
async function warmNode(t: ExecutionContext) {
  const dir = await tempDir(t)
  const repo = await copyRepository(base.repo, join(dir, 'repo'))
  const modules = join(dir, 'modules')
  await mkdir(modules)
  let hostile: Handler | null = null
  const server = await testServer(repo, (req, res, path) => (hostile ? hostile(req, res, path) : false))
  t.teardown(() => server.close())
  const fetch = (...extra: string[]) => cli(['fetch', 'foo@^1.4', '--source', server.url, '--trust', base.pub, '--module-dir', modules, ...extra])
  const first = await fetch('--json')
  t.is(first.exitCode, 0, first.stderr)
  t.deepEqual(JSON.parse(first.stdout).releases.map((r: any) => [r.release, r.status]), [['foo/tags/1.4.0', 'installed']])
  const verifies = async () => (await cli(['verify', 'foo/tags/1.4.0', '--module-dir', modules])).exitCode
  return {repo, server, fetch, verifies, arm: (handler: Handler) => void (hostile = handler)}
}

test('a warm fetch reads the signed index and its signature, downloads nothing, and says the release is present', async (t) => {
  const node = await warmNode(t)
  const before = node.server.requests.length
  const warm = await node.fetch('--json')
  t.is(warm.exitCode, 0, warm.stderr)
  t.deepEqual(JSON.parse(warm.stdout).releases.map((r: any) => [r.release, r.status, r.bytes]), [['foo/tags/1.4.0', 'already present', 0]])
  t.deepEqual(node.server.requests.slice(before), ['/index.json', '/index.json.sig'])
  t.is((await node.fetch()).stdout.trim(), 'foo/tags/1.4.0: already present')
  t.is(await node.verifies(), 0)
})

test('a warm fetch still refuses a bad index: tampered (65), too large (65), cut short of its Content-Length (69), a server error (69)', async (t) => {
  const node = await warmNode(t)
  const index = await readFile(join(node.repo, 'index.json'), 'utf8')

  await writeFile(join(node.repo, 'index.json'), index.replace('"version": 1', '"version": 7'))
  const tampered = await node.fetch()
  t.is(tampered.exitCode, 65, tampered.stderr)
  t.regex(tampered.stderr, /index\.json: signature by sha256:\w+ does not verify with any trusted key/)
  await writeFile(join(node.repo, 'index.json'), index)

  node.arm((_req, res, path) => {
    if (path !== '/index.json') return false
    sendMegabytes(res, 20)
    return true
  })
  const large = await node.fetch()
  t.is(large.exitCode, 65, large.stderr)
  t.regex(large.stderr, /index\.json: larger than 16777216 bytes; refused/)

  node.arm((req, res, path) => {
    if (path !== '/index.json') return false
    res.writeHead(200, {'content-length': index.length + 1000})
    res.write(index, () => req.socket.destroy())
    return true
  })
  const short = await node.fetch()
  t.is(short.exitCode, 69, short.stderr)
  t.regex(short.stderr, /connection reset or closed early .*\(4 attempts\)/)

  node.arm((_req, res) => {
    res.writeHead(503, {'retry-after': '0'})
    res.end('down')
    return true
  })
  const down = await node.fetch()
  t.is(down.exitCode, 69, down.stderr)
  t.regex(down.stderr, /index\.json: HTTP 503 \(4 attempts\)/)

  t.is(await node.verifies(), 0, 'what was installed is as it was')
})
