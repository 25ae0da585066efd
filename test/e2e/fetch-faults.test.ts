import {existsSync} from 'node:fs'
import {createServer as createHttpsServer} from 'node:https'
import {appendFile, chmod, mkdir, readFile, readdir, rename, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import test, {type ExecutionContext} from 'ava'

import {FAKE_PUPPET, cli} from '../helpers/cli.js'
import {type Handler, copyRepository, demoRepository, keyPair, sendMegabytes, testServer} from '../helpers/repository.js'
import {tempDir} from '../helpers/temp.js'
import {selfSignedCertificate} from '../helpers/tls.js'

// One signed repository (foo 1.3.0 and 1.4.0), built once; each test serves a copy it may break.
let base: {dir: string; repo: string; key: string; pub: string; otherPub: string}
test.before(async () => {
  const {mkdtemp, rm} = await import('node:fs/promises')
  const {tmpdir} = await import('node:os')
  const dir = await mkdtemp(join(tmpdir(), 'localpuppet-fetch-faults-'))
  process.on('exit', () => void rm(dir, {recursive: true, force: true}))
  const {key, pub} = await keyPair(dir, 'release')
  const other = await keyPair(dir, 'other')
  const {repo} = await demoRepository(dir, key)
  base = {dir, repo, key, pub, otherPub: other.pub}
})
test.after.always(async () => {
  const {rm} = await import('node:fs/promises')
  if (base) await rm(base.dir, {recursive: true, force: true})
})

interface Scenario {
  repo: string
  modules: string
  index: any
  saveIndex(index: any): Promise<void>
}

async function scenario(t: ExecutionContext): Promise<Scenario> {
  const dir = await tempDir(t)
  const repo = await copyRepository(base.repo, join(dir, 'repo'))
  const modules = join(dir, 'modules')
  await mkdir(modules)
  const index = JSON.parse(await readFile(join(repo, 'index.json'), 'utf8'))
  return {repo, modules, index, saveIndex: (next) => writeFile(join(repo, 'index.json'), JSON.stringify(next))}
}

/** A scenario and a node's own directories: its state and fake puppet's. */
async function nodeScenario(t: ExecutionContext): Promise<{s: Scenario; dir: string; state: string; fake: string}> {
  const s = await scenario(t)
  const dir = await tempDir(t)
  const fake = join(dir, 'fake')
  await mkdir(fake)
  return {s, dir, state: join(dir, 'state'), fake}
}

async function serve(t: ExecutionContext, root: string, handler?: Handler) {
  const server = await testServer(root, handler)
  t.teardown(() => server.close())
  return server
}

/** Nothing installed: no release directory and no install record. */
async function assertNothingInstalled(t: ExecutionContext, modules: string): Promise<void> {
  t.deepEqual((await readdir(modules)).filter((name) => !name.startsWith('.')), [], 'no release appeared')
  const records = await readdir(join(modules, '.localpuppet', 'records')).catch(() => [])
  t.deepEqual(records, [], 'no install record')
}

const fetchArgs = (s: Scenario, source: string, ...extra: string[]) => ['fetch', 'foo@^1.4', '--source', source, '--module-dir', s.modules, ...extra]

async function refused(t: ExecutionContext, s: Scenario, args: string[], exitCode: number, message: RegExp, env: Record<string, string> = {}) {
  const result = await cli(args, {env})
  t.is(result.exitCode, exitCode, result.stderr)
  t.regex(result.stderr, message)
  await assertNothingInstalled(t, s.modules)
  return result
}

test('an archive path with .. or an absolute path in the index is refused (65)', async (t) => {
  for (const archive of ['../../etc/passwd', '/etc/passwd', 'archives/../../x.tar.gz']) {
    const s = await scenario(t)
    s.index.apps.foo.tags['1.4.0'].archive = archive
    await s.saveIndex(s.index)
    await refused(t, s, fetchArgs(s, s.repo), 65, /tag "foo\/tags\/1\.4\.0": archive path .* is absolute, has '\.\.' or is invalid/)
  }
})

test('a modulepath entry naming a path outside the module dir is refused (65)', async (t) => {
  const s = await scenario(t)
  s.index.apps.foo.tags['1.4.0'].modulepath.push('../tags/1.0.0')
  await s.saveIndex(s.index)
  await refused(t, s, fetchArgs(s, s.repo), 65, /modulepath entry "\.\.\/tags\/1\.0\.0" is not a tag/)
})

test('an archive whose sha256 differs from the index is refused (65)', async (t) => {
  const s = await scenario(t)
  s.index.apps.foo.tags['1.4.0'].sha256 = '0'.repeat(64)
  await s.saveIndex(s.index)
  const server = await serve(t, s.repo)
  await refused(t, s, fetchArgs(s, server.url, '--insecure'), 65, /foo-1\.4\.0\.tar\.gz: sha256 \w+ differs from the index's 0{64}; refused/)
})

test('a tampered index with a valid-looking signature file is refused (65)', async (t) => {
  const s = await scenario(t)
  s.index.apps.foo.tags['1.4.0'].publishedAt = '2020-01-01T00:00:00.000Z'
  await s.saveIndex(s.index)
  const server = await serve(t, s.repo)
  await refused(t, s, fetchArgs(s, server.url, '--trust', base.pub), 65, /index\.json: signature by sha256:\w+ does not verify with any trusted key/)
})

test('an index signed by a key that is not trusted is refused (65); an unsigned one too', async (t) => {
  const s = await scenario(t)
  const server = await serve(t, s.repo)
  await refused(t, s, fetchArgs(s, server.url, '--trust', base.otherPub), 65, /does not verify with any trusted key \(1 trusted\)/)
  const { rm } = await import('node:fs/promises')
  await rm(join(s.repo, 'index.json.sig'))
  await refused(t, s, fetchArgs(s, server.url, '--trust', base.pub), 65, /index\.json: not signed, and trusted keys are configured/)
})

test('--trust given a private key is refused (64) naming it, with the command that gives its public key: fetch, install, apply and plan --fetch, the trust setting', async (t) => {
  const s = await scenario(t)
  const dir = await tempDir(t)
  const input = join(dir, 'input.yaml')
  await writeFile(input, 'app: foo/tags/1.4.0\n')
  const line = `localpuppet: trusted key ${base.key} is a private key: pass its public key instead (openssl pkey -in ${base.key} -pubout -out ${base.key.replace(/\.pem$/, '.pub.pem')}), and keep the private key off the nodes`
  const runArgs = ['--fetch', '--source', s.repo, '--module-dir', s.modules, '--state-dir', join(dir, 'state'), '--puppet', '/bin/false']
  for (const args of [
    fetchArgs(s, s.repo, '--trust', base.key),
    ['install', join(base.dir, 'foo-1.4.0.tar.gz'), '--module-dir', s.modules, '--trust', base.key],
    ['apply', input, ...runArgs, '--trust', base.key],
    ['plan', input, ...runArgs, '--trust', base.key],
  ]) {
    const result = await refused(t, s, args, 64, /is a private key/)
    t.is(result.stderr.split('\n')[0], line, args[0])
  }

  // A usage error, not an attempt: nothing recorded.
  t.false(existsSync(join(dir, 'state', 'runs')), 'no run record')
  const setting = await refused(t, s, fetchArgs(s, s.repo), 64, /is a private key/, {LOCALPUPPET_TRUST: base.key})
  t.is(setting.stderr.split('\n')[0], line)
  // In a directory of trusted keys, the same.
  const keys = join(dir, 'keys')
  await mkdir(keys)
  await writeFile(join(keys, 'release.pem'), await readFile(base.key))
  await refused(t, s, fetchArgs(s, s.repo, '--trust', keys), 64, new RegExp(`trusted key ${join(keys, 'release.pem')} is a private key`))
})

test('an archive larger than declared, an endless body, and a short body are refused (65)', async (t) => {
  const s = await scenario(t)
  const entry = s.index.apps.foo.tags['1.4.0']
  entry.size -= 10
  await s.saveIndex(s.index)
  const server = await serve(t, s.repo)
  await refused(t, s, fetchArgs(s, server.url, '--insecure'), 65, /longer than the \d+ bytes the index says; refused/)

  const endless = await serve(t, s.repo, (_req, res, path) => {
    if (!path.endsWith('.tar.gz')) return false
    res.writeHead(200)
    const chunk = Buffer.alloc(64 * 1024, 1)
    const pump = () => {
      while (res.write(chunk)) if (res.destroyed) return
      res.once('drain', pump)
    }

    res.on('close', () => res.removeAllListeners('drain'))
    pump()
    return true
  })
  await refused(t, s, fetchArgs(s, endless.url, '--insecure'), 65, /longer than the \d+ bytes the index says; refused/)

  entry.size += 10
  await s.saveIndex(s.index)
  const short = await serve(t, s.repo, async (_req, res, path) => {
    if (!path.endsWith('.tar.gz')) return false
    const body = await readFile(join(s.repo, path))
    res.writeHead(200, {'content-length': body.length - 100})
    res.end(body.subarray(0, body.length - 100))
    return true
  })
  await refused(t, s, fetchArgs(s, short.url, '--insecure'), 65, /truncated: \d+ of the \d+ bytes the index says/)
})

test('a download cut short by the server is retried, then reported unavailable (69)', async (t) => {
  const s = await scenario(t)
  const server = await serve(t, s.repo, async (req, res, path) => {
    if (!path.endsWith('.tar.gz')) return false
    const body = await readFile(join(s.repo, path))
    res.writeHead(200, {'content-length': body.length})
    res.write(body.subarray(0, 200), () => req.socket.destroy())
    return true
  })
  await refused(t, s, fetchArgs(s, server.url, '--insecure'), 69, /repository http:\/\/127\.0\.0\.1:\d+\/: connection reset or closed early .*\(4 attempts\)/)
  t.is(server.requests.filter((path) => path.endsWith('.tar.gz')).length, 4)
})

test('HTTP 500, then 429, then success: retried and installed', async (t) => {
  const s = await scenario(t)
  let faults = 0
  const server = await serve(t, s.repo, (_req, res, path) => {
    if (path !== '/index.json' || faults >= 2) return false
    res.writeHead(faults++ === 0 ? 500 : 429, {'retry-after': '0'})
    res.end('busy')
    return true
  })
  const result = await cli([...fetchArgs(s, server.url, '--trust', base.pub), '--json'])
  t.is(result.exitCode, 0, result.stderr)
  t.deepEqual(JSON.parse(result.stdout).releases.map((r: any) => [r.release, r.status]), [['foo/tags/1.4.0', 'installed']])
  t.is(server.requests.filter((path) => path === '/index.json').length, 3)
})

test('a redirect loop (69), a 404 for an indexed archive (69, naming the URL), a refused connection (69)', async (t) => {
  const s = await scenario(t)
  const loop = await serve(t, s.repo, (_req, res, path) => {
    if (path !== '/index.json') return false
    res.writeHead(302, {location: '/index.json'})
    res.end()
    return true
  })
  await refused(t, s, fetchArgs(s, loop.url, '--insecure'), 69, /index\.json: more than 5 redirects \(a redirect loop\?\)/)

  const { rm } = await import('node:fs/promises')
  await rm(join(s.repo, 'archives/foo/foo-1.4.0.tar.gz'))
  const missing = await serve(t, s.repo)
  await refused(t, s, fetchArgs(s, missing.url, '--insecure'), 69, new RegExp(`${missing.url}/archives/foo/foo-1\\.4\\.0\\.tar\\.gz: 404 not found`))

  const port = missing.port
  await missing.close()
  await refused(t, s, fetchArgs(s, `http://127.0.0.1:${port}/`, '--insecure'), 69, /connection refused \(4 attempts\)/)
})

test('a huge index is refused without reading it all (65)', async (t) => {
  const s = await scenario(t)
  const server = await serve(t, s.repo, (_req, res, path) => {
    if (path !== '/index.json') return false
    sendMegabytes(res, 64)
    return true
  })
  await refused(t, s, fetchArgs(s, server.url, '--insecure'), 65, /index\.json: larger than 16777216 bytes; refused/)
})

test('plain http with no trusted key is refused unless --insecure (64); a tag or range not there is 66; trunk is not in repositories', async (t) => {
  const s = await scenario(t)
  const server = await serve(t, s.repo)
  await refused(t, s, fetchArgs(s, server.url), 64, /plain http with no trusted key; anyone on the path could substitute releases/)
  await refused(t, s, ['fetch', 'foo@^2', '--source', s.repo, '--module-dir', s.modules], 66, /foo@\^2: no tag of foo in the repository .* satisfies "\^2"; it has 1\.4\.0, 1\.3\.0/)
  await refused(t, s, ['fetch', 'foo/tags/9.9.9', '--source', s.repo, '--module-dir', s.modules], 66, /foo\/tags\/9\.9\.9 is not in the repository/)
  await refused(t, s, ['fetch', 'foo/trunk', '--source', s.repo, '--module-dir', s.modules], 64, /foo\/trunk: repositories hold tags only, not trunk/)
})

test('an archive that is not what the index says (another tag behind the right digest) is refused (65)', async (t) => {
  const s = await scenario(t)
  // The index entry of 1.4.0 points at 1.3.0's archive, size and sha256: the bytes match, the content does not.
  const tags = s.index.apps.foo.tags
  tags['1.4.0'] = {...tags['1.4.0'], archive: tags['1.3.0'].archive, size: tags['1.3.0'].size, sha256: tags['1.3.0'].sha256}
  await s.saveIndex(s.index)
  await refused(t, s, fetchArgs(s, s.repo), 65, /holds foo\/tags\/1\.3\.0 .*not what the index says for foo\/tags\/1\.4\.0: another release; refused/)
})

test('source mistakes get one line naming the source and the fix: no scheme (66), https:// against a plain-http port (69)', async (t) => {
  const s = await scenario(t)
  const cwd = await tempDir(t)
  for (const source of ['releases.example.com/puppet', 'localhost:8080/repo']) {
    const result = await cli(fetchArgs(s, source), {cwd})
    t.is(result.exitCode, 66, result.stderr)
    t.is(result.stderr, `localpuppet: source ${source}: no such directory, and it reads as a host: did you mean https://${source} (or http://${source})?`)
    // apply --fetch takes the same path.
    const applied = await cli(['apply', join(cwd, 'none.yaml'), '--fetch', '--source', source, '--module-dir', s.modules, '--state-dir', join(cwd, 'state')], {cwd, input: ''})
    t.is(applied.exitCode, 66)
  }

  const server = await serve(t, s.repo)
  const https = server.url.replace(/^http:/, 'https:')
  const plain = await refused(t, s, fetchArgs(s, https), 69, /answers plain HTTP/)
  t.is(plain.stderr, `localpuppet: source ${https}/: 127.0.0.1:${server.port} answers plain HTTP, not HTTPS, on that port: did you mean ${server.url}/ (with a trusted key, or --insecure)?`)
  t.is(server.requests.length, 0)

  // A relative directory that exists is still a directory.
  await copyRepository(s.repo, join(cwd, 'repo.example.com'))
  t.is((await cli(['fetch', 'foo@^1.4', '--source', 'repo.example.com', '--module-dir', s.modules], {cwd})).exitCode, 0)
})

test('HTTP_PROXY is honoured; NO_PROXY bypasses it', async (t) => {
  const s = await scenario(t)
  // A proxy gets the absolute URL; this one serves the repository's parent, so /repo/ is the repository.
  const proxy = await serve(t, join(s.repo, '..'))
  const result = await cli(fetchArgs(s, 'http://releases.invalid/repo', '--insecure'), {env: {HTTP_PROXY: proxy.url, http_proxy: proxy.url, NO_PROXY: ''}})
  t.is(result.exitCode, 0, result.stderr)
  t.true(proxy.requests.includes('http://releases.invalid/repo/index.json'), proxy.requests.join(' '))
  t.true(proxy.requests.some((url) => url.startsWith('http://releases.invalid/repo/archives/')))
  const seen = proxy.requests.length
  const bypassed = await cli(fetchArgs(s, 'http://releases.invalid/repo', '--insecure'), {env: {HTTP_PROXY: proxy.url, http_proxy: proxy.url, NO_PROXY: 'releases.invalid', no_proxy: 'releases.invalid'}})
  t.is(bypassed.exitCode, 69, bypassed.stderr)
  t.is(proxy.requests.length, seen, 'NO_PROXY: the proxy saw nothing')
})

test('https without keys is allowed; a redirect from https to plain http is refused (65)', async (t) => {
  const s = await scenario(t)
  const {key, cert} = await selfSignedCertificate(await tempDir(t))
  const plain = await serve(t, s.repo)
  let downgrade = false
  const server = createHttpsServer({key: await readFile(key), cert: await readFile(cert)}, async (req, res) => {
    const path = new URL(req.url ?? '/', 'https://x').pathname
    if (downgrade) {
      res.writeHead(301, {location: `${plain.url}${path}`})
      return res.end()
    }

    const body = await readFile(join(s.repo, path)).catch(() => null)
    res.writeHead(body ? 200 : 404)
    res.end(body ?? 'not found')
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  server.on('connection', (socket) => t.teardown(() => socket.destroy()))
  const url = `https://127.0.0.1:${(server.address() as {port: number}).port}`
  const env = {NODE_EXTRA_CA_CERTS: cert}

  downgrade = true
  await refused(t, s, fetchArgs(s, url), 65, /redirected to http:\/\/127\.0\.0\.1:\d+\/index\.json; refused \(never from https to plain http\)/, env)
  downgrade = false
  const ok = await cli(fetchArgs(s, url), {env})
  t.is(ok.exitCode, 0, ok.stderr)
  t.regex(ok.stdout, /^fetched foo\/tags\/1\.4\.0 from https:\/\/127\.0\.0\.1:\d+\/ \(.*, with dist\/tags\/2\.0\.1\)$/)
})

test('a tag installed with other content is a conflict (73) found before downloading', async (t) => {
  const s = await scenario(t)
  const first = await cli(['fetch', 'foo/tags/1.4.0', '--source', s.repo, '--module-dir', s.modules])
  t.is(first.exitCode, 0, first.stderr)
  // Another repository where dist/tags/2.0.1 has other content.
  const dir = await tempDir(t)
  const {writeTree} = await import('../helpers/temp.js')
  const modules = join(dir, 'm')
  await writeTree(modules, {'foo/tags/1.5.0/manifest.yaml': 'modulepath: [dist/tags/2.0.1]\n', 'foo/tags/1.5.0/foo/manifests/init.pp': 'class foo {}\n', 'dist/tags/2.0.1/platform/manifests/init.pp': 'class platform { }\n'})
  t.is((await cli(['pack', 'foo/tags/1.5.0', '--module-dir', modules, '-o', join(dir, 'foo.tar.gz')])).exitCode, 0)
  t.is((await cli(['publish', join(dir, 'foo.tar.gz'), '--repo', join(dir, 'repo')])).exitCode, 0)
  const server = await serve(t, join(dir, 'repo'))
  const result = await cli(['fetch', 'foo/tags/1.5.0', '--source', server.url, '--insecure', '--module-dir', s.modules])
  t.is(result.exitCode, 73, result.stderr)
  t.regex(result.stderr, /dist\/tags\/2\.0\.1 is installed with other content \(sha256:\w+\) than the repository's \(sha256:\w+\)/)
  t.deepEqual(server.requests, ['/index.json'], 'nothing downloaded')
})

// Issue 27, item 3: a web-server outage must not stop a timer fleet from enforcing what it has.
test('apply --fetch with the repository down runs the installed release, warns, and records, shows and counts the failed fetch; a range resolves among installed tags', async (t) => {
  const {s, dir, state, fake} = await nodeScenario(t)
  let down = false
  const server = await serve(t, s.repo, (_req, res) => {
    if (!down) return false
    res.writeHead(503).end('maintenance')
    return true
  })
  const input = join(dir, 'input.yaml')
  const metrics = join(dir, 'node.prom')
  const hooked = join(dir, 'hook.json')
  const apply = async (app: string, ...extra: string[]) => {
    await writeFile(input, `app: ${app}\nclasses: [foo, platform]\n`)
    return cli(['apply', input, '--fetch', '--source', server.url, '--trust', base.pub, '--module-dir', s.modules, '--state-dir', state, '--puppet', FAKE_PUPPET, '--metrics-file', metrics, '--on-finish', `cp /dev/stdin ${hooked}`, ...extra], {env: {FAKE_PUPPET_DIR: fake, FAKE_PUPPET_SLEEP: '0'}})
  }

  const check = async () => cli(['status', '--check', '--state-dir', state])

  // The repository is up: foo 1.3.0 is fetched and applied.
  const first = await apply('foo/tags/1.3.0')
  t.is(first.exitCode, 0, first.stderr)
  t.regex(await readFile(metrics, 'utf8'), /^localpuppet_fetch_failed 0$/m)

  // Down (HTTP 503 after retries, 69): the installed tag runs, with a warning.
  down = true
  const fallback = await apply('foo/tags/1.3.0', '--json')
  t.is(fallback.exitCode, 0, fallback.stderr)
  t.regex(fallback.stderr, /localpuppet: warning: --fetch: .*HTTP 503.*; applying foo\/tags\/1\.3\.0 as installed here \(verified\)/)
  const record = JSON.parse(fallback.stdout)
  t.like(record, {state: 'succeeded', release: 'foo/tags/1.3.0', fetch: {source: server.url, releases: [], fallback: true}})
  t.regex(record.fetch.error, /HTTP 503/)
  t.like(JSON.parse(await readFile(hooked, 'utf8')), {id: record.id, fetch: {fallback: true}}, 'the finish hook sees it')
  t.regex(await readFile(metrics, 'utf8'), /^localpuppet_fetch_failed 1$/m)
  const status = await cli(['status', '--state-dir', state])
  t.regex(status.stdout, /fetch\s+failed, ran the installed release: .*HTTP 503/)
  const warning = await check()
  t.is(warning.exitCode, 1, `WARNING, not CRITICAL: ${warning.stdout}`)
  t.regex(warning.stdout, /^LOCALPUPPET WARNING - fetch failed, ran the installed foo\/tags\/1\.3\.0: /)

  // A range: the newest installed tag that fits (1.3.0), not the repository's (1.4.0).
  const range = await apply('foo@^1.3', '--json')
  t.is(range.exitCode, 0, range.stderr)
  t.like(JSON.parse(range.stdout), {release: 'foo/tags/1.3.0', ref: 'foo@^1.3', fetch: {fallback: true}})

  // A tag that is not installed: nothing to fall back on, the fetch's own 69.
  const missing = await apply('foo/tags/1.4.0')
  t.is(missing.exitCode, 69, missing.stderr)
  t.regex(missing.stderr, /HTTP 503.*nothing installed here to fall back on/)

  // Up again, but the index tampered with: still a refusal (65), never a fallback.
  down = false
  s.index.apps.foo.tags['1.3.0'].publishedAt = '2020-01-01T00:00:00.000Z'
  await s.saveIndex(s.index)
  const tampered = await apply('foo/tags/1.3.0')
  t.is(tampered.exitCode, 65, tampered.stderr)
  t.notRegex(tampered.stderr, /as installed here/)

  // Down, and the installed tag modified since install: it does not verify, refused (65).
  down = true
  const file = join(s.modules, 'foo/tags/1.3.0/foo/manifests/init.pp')
  await chmod(file, 0o644)
  await appendFile(file, '# changed\n')
  const modified = await apply('foo/tags/1.3.0')
  t.is(modified.exitCode, 65, modified.stderr)
  t.regex(modified.stderr, /modified since install/)
})

// The channel a node follows was remembered as moved when its index was accepted, before
// the new tag was downloaded: an archive that could not be had then (a mirror that syncs the
// index before the archives, an outage) left the fallback resolving the channel to a tag the
// node does not have, and the node stopped running at all (69) instead of keeping its release.
test('apply --fetch on a channel just moved, whose new tag cannot be downloaded: the node keeps running the tag it has, warns, and takes the new one once it can', async (t) => {
  const {s, dir, state, fake} = await nodeScenario(t)
  const input = join(dir, 'input.yaml')
  await writeFile(input, 'app: foo/channels/stable\nclasses: [foo, platform]\n')
  const apply = () => cli(['apply', input, '--fetch', '--json', '--source', s.repo, '--trust', base.pub, '--module-dir', s.modules, '--state-dir', state, '--puppet', FAKE_PUPPET], {env: {FAKE_PUPPET_DIR: fake, FAKE_PUPPET_SLEEP: '0'}})
  const promote = async (tag: string) => {
    const promoted = await cli(['promote', `foo/tags/${tag}`, '--channel', 'stable', '--repo', s.repo, '--sign', base.key])
    t.is(promoted.exitCode, 0, promoted.stderr)
  }

  await promote('1.3.0')
  const first = await apply()
  t.is(first.exitCode, 0, first.stderr)
  t.like(JSON.parse(first.stdout), {state: 'succeeded', release: 'foo/tags/1.3.0'})

  await promote('1.4.0')
  const archive = join(s.repo, 'archives/foo/foo-1.4.0.tar.gz')
  await rename(archive, `${archive}.away`)
  // Its objects gone too: a node that has 1.3.0 would otherwise take 1.4.0 from them.
  await rename(join(s.repo, 'objects'), join(s.repo, 'objects.away'))
  for (const attempt of [1, 2]) {
    const kept = await apply()
    t.is(kept.exitCode, 0, `run ${attempt}: ${kept.stderr}`)
    t.regex(kept.stderr, /warning: --fetch: .*foo-1\.4\.0\.tar\.gz: not found.*; applying foo\/tags\/1\.3\.0 as installed here \(verified\)/)
    t.like(JSON.parse(kept.stdout), {state: 'succeeded', release: 'foo/tags/1.3.0', fetch: {fallback: true}})
  }

  // Without --fetch, the channel is still what the node has.
  const plan = await cli(['plan', input, '--module-dir', s.modules, '--json'])
  t.like(JSON.parse(plan.stdout), {release: 'foo/tags/1.3.0'})

  await rename(`${archive}.away`, archive)
  await rename(join(s.repo, 'objects.away'), join(s.repo, 'objects'))
  const moved = await apply()
  t.is(moved.exitCode, 0, moved.stderr)
  t.like(JSON.parse(moved.stdout), {state: 'succeeded', release: 'foo/tags/1.4.0'})
  t.like(JSON.parse((await cli(['plan', input, '--module-dir', s.modules, '--json'])).stdout), {release: 'foo/tags/1.4.0'})
})
