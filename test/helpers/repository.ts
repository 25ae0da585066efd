import {generateKeyPairSync} from 'node:crypto'
import {appendFile, chmod, cp, mkdir, writeFile} from 'node:fs/promises'
import {type IncomingMessage, type ServerResponse, createServer} from 'node:http'
import {join} from 'node:path'

import {cli, FIXTURES} from './cli.js'

export const DEMO_MODULES = join(FIXTURES, 'demo', 'modules')

/** An Ed25519 key pair written as PEM files: `<name>.pem` and `<name>.pub.pem`. */
export async function keyPair(dir: string, name: string): Promise<{key: string; pub: string}> {
  const {privateKey, publicKey} = generateKeyPairSync('ed25519')
  const key = join(dir, `${name}.pem`)
  const pub = join(dir, `${name}.pub.pem`)
  await writeFile(key, privateKey.export({type: 'pkcs8', format: 'pem'}), {mode: 0o600})
  await writeFile(pub, publicKey.export({type: 'spki', format: 'pem'}))
  return {key, pub}
}

/** Packs the demo's foo 1.3.0 and 1.4.0 (signed) and publishes them (index signed) into `<dir>/repo`. */
export async function demoRepository(dir: string, key: string): Promise<{repo: string; archives: string[]}> {
  await mkdir(dir, {recursive: true})
  const archives = []
  for (const tag of ['1.3.0', '1.4.0']) {
    const archive = join(dir, `foo-${tag}.tar.gz`)
    const packed = await cli(['pack', `foo/tags/${tag}`, '--module-dir', DEMO_MODULES, '-o', archive, '--sign', key])
    if (packed.exitCode !== 0) throw new Error(packed.stderr)
    archives.push(archive)
  }

  const repo = join(dir, 'repo')
  const published = await cli(['publish', ...archives, '--repo', repo, '--sign', key])
  if (published.exitCode !== 0) throw new Error(published.stderr)
  return {repo, archives}
}

/** A signed demo repository in a fresh temp dir, for a whole test file (`test.before`); `remove` when done. */
export async function sharedDemoRepository(prefix: string): Promise<{dir: string; repo: string; key: string; pub: string; remove(): Promise<void>}> {
  const {mkdtemp, rm} = await import('node:fs/promises')
  const {tmpdir} = await import('node:os')
  const dir = await mkdtemp(join(tmpdir(), prefix))
  const {key, pub} = await keyPair(dir, 'release')
  const {repo} = await demoRepository(dir, key)
  return {dir, repo, key, pub, remove: () => rm(dir, {recursive: true, force: true})}
}

export async function copyRepository(from: string, to: string): Promise<string> {
  await cp(from, to, {recursive: true})
  return to
}

export type Handler = (req: IncomingMessage, res: ServerResponse, path: string) => boolean | void | Promise<boolean | void>

export interface TestServer {
  url: string
  port: number
  /** Paths requested, in order. */
  requests: string[]
  close(): Promise<void>
}

/**
 * A small HTTP server on 127.0.0.1 that serves `root` as a web server would, unless
 * `handler` answers first (returns true): the faults a real server or network produces.
 * A request in absolute form (through a proxy) is served by its path.
 */
export async function testServer(root: string, handler?: Handler): Promise<TestServer> {
  const requests: string[] = []
  const sockets = new Set<import('node:net').Socket>()
  const server = createServer(async (req, res) => {
    const path = new URL(req.url ?? '/', 'http://localhost').pathname
    requests.push(req.url ?? '/')
    if (handler && (await handler(req, res, path))) return
    const {readFile} = await import('node:fs/promises')
    try {
      const body = await readFile(join(root, decodeURIComponent(path)))
      res.writeHead(200, {'content-length': body.length})
      res.end(body)
    } catch {
      res.writeHead(404)
      res.end('not found')
    }
  })
  server.on('connection', (socket) => {
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const {port} = server.address() as {port: number}
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    requests,
    async close() {
      for (const socket of sockets) socket.destroy()
      await new Promise((resolve) => server.close(resolve))
    },
  }
}

/**
 * `release` of the module directory `from`, packed and installed into `modules` (made if
 * missing), then `file` in it (relative to the release) edited as someone on the node
 * might: the tag no longer verifies. Throws if pack or install fails.
 */
export async function installEdited(dir: string, from: string, release: string, modules: string, file: string): Promise<void> {
  await mkdir(modules, {recursive: true})
  const archive = join(dir, `${release.replaceAll('/', '-')}.tar.gz`)
  for (const args of [['pack', release, '--module-dir', from, '-o', archive], ['install', archive, '--module-dir', modules]]) {
    const result = await cli(args)
    if (result.exitCode !== 0) throw new Error(`${args[0]} exited ${result.exitCode}: ${result.stderr}`)
  }

  const edited = join(modules, release, file)
  await chmod(edited, 0o644)
  await appendFile(edited, '# edited on the node\n')
}

/** Answers with `megabytes` MiB of spaces and no Content-Length (an index too large to accept), paced by the client. */
export function sendMegabytes(res: ServerResponse, megabytes: number): void {
  res.writeHead(200)
  const chunk = Buffer.alloc(1024 * 1024, 0x20)
  let sent = 0
  const pump = () => {
    while (sent < megabytes && res.write(chunk)) sent++
    if (sent >= megabytes) res.end()
    else res.once('drain', pump)
  }

  res.on('close', () => res.removeAllListeners('drain'))
  pump()
}
