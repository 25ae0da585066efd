import {createHash, generateKeyPairSync} from 'node:crypto'
import {mkdir, readFile, readdir, rm, writeFile} from 'node:fs/promises'
import {type IncomingMessage, type ServerResponse, createServer} from 'node:http'
import {join} from 'node:path'

import test, {type ExecutionContext} from 'ava'

import {LocalpuppetError} from '../../../../src/lib/errors.js'
import {nodeDocumentPath, verifyNodeDocumentSignature} from '../../../../src/lib/repository/node-documents/document.js'
import {updateIndex} from '../../../../src/lib/repository/index-update.js'
import {type RepositoryIndex, inputPathFor} from '../../../../src/lib/repository/repository-index.js'
import {openSource} from '../../../../src/lib/source/fetch.js'
import {tempDir} from '../../../helpers/temp.js'

const {privateKey, publicKey} = generateKeyPairSync('ed25519')
const DIGEST = `sha256:${'d'.repeat(64)}`
const tag = (name: string) => ({
  archive: `archives/foo/foo-${name}.tar.gz`,
  size: 1,
  sha256: 'c'.repeat(64),
  digest: DIGEST,
  modulepath: [`foo/tags/${name}`],
  digests: {[`foo/tags/${name}`]: DIGEST},
  signedBy: null,
  publishedAt: '2026-11-25T00:00:00.000Z',
})

/** A static web server as nginx is for these files: an ETag on each, 304 when If-None-Match names it; `hostile` answers first. */
async function server(t: ExecutionContext, root: string, hostile?: (path: string, res: ServerResponse) => Promise<boolean>) {
  const requests: Array<{path: string; status: number}> = []
  const http = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    const path = req.url!.slice(1)
    const seen = {path, status: 0}
    requests.push(seen)
    if (await hostile?.(path, res)) return void (seen.status = res.statusCode)
    const body = await readFile(join(root, path)).catch(() => undefined)
    if (body === undefined) return void res.writeHead((seen.status = 404)).end()
    const etag = `"${createHash('sha256').update(body).digest('hex').slice(0, 16)}"`
    if (req.headers['if-none-match'] === etag) return void res.writeHead((seen.status = 304), {etag}).end()
    res.writeHead((seen.status = 200), {etag, 'content-length': body.length}).end(body)
  })
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve))
  http.on('connection', (socket) => t.teardown(() => void socket.destroy()))
  t.teardown(() => new Promise<void>((resolve) => http.close(() => resolve())))
  return {url: `http://127.0.0.1:${(http.address() as {port: number}).port}/`, requests}
}

async function setup(t: ExecutionContext) {
  const dir = await tempDir(t)
  const repo = join(dir, 'repo')
  const moduleDir = join(dir, 'modules')
  await mkdir(moduleDir, {mode: 0o755})
  const pub = join(dir, 'release.pub.pem')
  await writeFile(pub, publicKey.export({type: 'spki', format: 'pem'}))
  /** Publishes node inputs (text by node; null removes the node) and app changes, as publish and promote do through updateIndex. */
  const publish = (inputs: Record<string, string | null>, change: (index: RepositoryIndex) => void = () => {}, expiresInMs?: number) =>
    updateIndex({repo, key: privateKey, expiresInMs}, async (index) => {
      index.apps.foo ??= {tags: {'1.0.0': tag('1.0.0'), '1.1.0': tag('1.1.0')}, channels: {stable: '1.0.0'}}
      for (const [node, text] of Object.entries(inputs)) {
        if (text === null) {
          delete index.nodes![node]
          continue
        }

        const sha256 = createHash('sha256').update(text).digest('hex')
        await mkdir(join(repo, 'inputs', node), {recursive: true})
        await writeFile(join(repo, inputPathFor(node, sha256)), text)
        // As publish sets an entry (publish-inputs.ts): the table of an index without nodes reads only what is asked.
        ;(index.nodes ??= {})[node] = {input: inputPathFor(node, sha256), size: Buffer.byteLength(text), sha256, app: text.match(/^app: (\S+)/)![1], publishedAt: '2026-11-25T00:00:00.000Z'}
      }

      change(index)
      return {}
    })
  const options = {moduleDir, trust: [pub], trustDir: null}
  /** One tick of a node: its input read through a fresh source, as apply --fetch does. */
  const tick = async (url: string, node = 'web1', elsewhere?: string) => {
    const source = await openSource(url, {})
    if (elsewhere) await mkdir(elsewhere, {mode: 0o755})
    try {
      return await source.nodeInput!(node, elsewhere ? {...options, moduleDir: elsewhere} : options)
    } finally {
      await source.close()
    }
  }

  return {dir, repo, moduleDir, publish, tick}
}

const documentOf = async (repo: string, node: string) => {
  const index = JSON.parse(await readFile(join(repo, 'index.json'), 'utf8')) as RepositoryIndex
  const path = join(repo, nodeDocumentPath(index.repository!, node))
  return {path, bytes: await readFile(path), signature: await readFile(`${path}.sig`), json: JSON.parse(await readFile(path, 'utf8'))}
}

test("publishing writes each node's signed document; publishing one node's input rewrites only its document; a removed node's document is removed; a renewal re-signs them all", async (t) => {
  const {repo, publish} = await setup(t)
  await publish({web1: 'app: foo/channels/stable\n', web2: 'app: foo/channels/stable\n'})
  const index = JSON.parse(await readFile(join(repo, 'index.json'), 'utf8'))
  t.true(index.nodeDocuments)
  const web1 = await documentOf(repo, 'web1')
  t.regex(verifyNodeDocumentSignature(web1.bytes, web1.signature, [publicKey], web1.path), /^sha256:/)
  t.is(web1.json.node, 'web1')
  t.false(web1.bytes.toString().includes('web2'))
  const web2 = await documentOf(repo, 'web2')

  await publish({web2: 'app: foo/channels/stable\nclasses: [x]\n'})
  t.deepEqual((await documentOf(repo, 'web1')).bytes, web1.bytes, "web1's document is not rewritten when web2's input changes")
  t.true((await documentOf(repo, 'web2')).json.version > web2.json.version)

  // A promote reaches the followers of the channel.
  await publish({}, (i) => (i.apps.foo.channels!.stable = '1.1.0'))
  const promoted = await documentOf(repo, 'web1')
  t.deepEqual(promoted.json.apps.foo.channels, {stable: '1.1.0'})
  t.true(promoted.json.version > web1.json.version)

  // A publish of nothing (re-signing, renewing expiry): every document again, with the new expiry.
  await publish({})
  const renewed = await documentOf(repo, 'web1')
  t.true(renewed.json.version > promoted.json.version)
  t.is(renewed.json.expires, JSON.parse(await readFile(join(repo, 'index.json'), 'utf8')).expires)

  await publish({web2: null})
  t.deepEqual((await readdir(join(repo, 'nodes'))).sort(), [nodeDocumentPath(index.repository, 'web1').slice('nodes/'.length), `${nodeDocumentPath(index.repository, 'web1').slice('nodes/'.length)}.sig`].sort())
})

test("a node's quiet tick is one conditional request for its own document, answered 304; another node's publish does not change that; its own publish reaches it", async (t) => {
  const {repo, publish, tick} = await setup(t)
  await publish({web1: 'app: foo/channels/stable\n', web2: 'app: foo/channels/stable\n'})
  const {url, requests} = await server(t, repo)
  const document = (await documentOf(repo, 'web1')).path.slice(repo.length + 1)
  // First contact: the index gives the repository's id, then the document; from then on, the document alone.
  t.is((await tick(url)).text, 'app: foo/channels/stable\n')
  t.deepEqual(requests.map((r) => `${r.path} ${r.status}`).slice(0, 4), ['index.json 200', 'index.json.sig 200', `${document} 200`, `${document}.sig 200`])
  /** What a tick asked of the repository besides the input (which the node's kept copy would spare it: apply --fetch passes it). */
  const asked = async () => {
    requests.length = 0
    await tick(url)
    return requests.filter((r) => !r.path.startsWith('inputs/')).map((r) => `${r.path} ${r.status}`)
  }

  t.deepEqual(await asked(), [`${document} 304`])
  await publish({web2: 'app: foo/channels/stable\nclasses: [x]\n'})
  t.deepEqual(await asked(), [`${document} 304`])

  await publish({web1: 'app: foo/channels/stable\nclasses: [y]\n'})
  requests.length = 0
  const got = await tick(url)
  t.is(got.text, 'app: foo/channels/stable\nclasses: [y]\n')
  t.deepEqual(requests.slice(0, 2).map((r) => `${r.path} ${r.status}`), [`${document} 200`, `${document}.sig 200`])
})

/** Answers a request itself (a hostile server). */
function answered(answer: () => void): boolean {
  answer()
  return true
}

async function refusal(t: ExecutionContext, promise: Promise<unknown>, message: RegExp) {
  const error = await t.throwsAsync(promise)
  t.true(error instanceof LocalpuppetError, error?.stack)
  t.is((error as LocalpuppetError).exitCode, 65)
  t.regex(error!.message, message)
}

test('a node whose document would be larger than a node reads (a range matching thousands of tags) is refused (65) before any document or the index is written', async (t) => {
  const {repo, publish} = await setup(t)
  await publish({web1: 'app: foo/channels/stable\n'})
  const before = await readFile(join(repo, 'index.json'))
  const error = await t.throwsAsync(
    publish({db1: 'app: foo@^1\n'}, (i) => {
      for (let n = 0; n < 6000; n++) i.apps.foo.tags[`1.2.${n}`] = tag(`1.2.${n}`)
      i.nodes!.db1.app = 'foo@^1'
    }),
  )
  t.is((error as LocalpuppetError).exitCode, 65)
  t.regex(error!.message, /^node db1: its document would be \d+ bytes, over the 2097152 a node reads/)
  t.deepEqual(await readFile(join(repo, 'index.json')), before)
  t.is((await readdir(join(repo, 'nodes'))).length, 2)
})

test("another node's document in this node's place, an older document replayed, or an expired one is refused (65), and one withheld once accepted is unavailable (69: the node keeps what it has); a repository without documents is read through index.json by a node that never read one", async (t) => {
  const {dir, repo, publish, tick} = await setup(t)
  await publish({web1: 'app: foo/channels/stable\n', web2: 'app: foo/channels/stable\n'})
  const old = await documentOf(repo, 'web1')
  let serve: ((path: string, res: ServerResponse) => Promise<boolean>) | undefined
  const {url} = await server(t, repo, async (path, res) => serve?.(path, res) ?? false)
  await tick(url)
  await tick(url)

  // web2's genuine, signed document served at web1's path.
  const other = await documentOf(repo, 'web2')
  const mine = old.path.slice(repo.length + 1)
  serve = async (path, res) => {
    if (path === mine) return answered(() => res.writeHead(200).end(other.bytes))
    if (path === `${mine}.sig`) return answered(() => res.writeHead(200).end(other.signature))
    return false
  }

  await refusal(t, tick(url), /node: the document of node "web2", not of web1/)

  // After a publish of web1 is accepted, its older document replayed.
  serve = undefined
  await publish({web1: 'app: foo/channels/stable\nclasses: [y]\n'})
  t.is((await tick(url)).text, 'app: foo/channels/stable\nclasses: [y]\n')
  serve = async (path, res) => {
    if (path === mine) return answered(() => res.writeHead(200, {etag: '"old"'}).end(old.bytes))
    if (path === `${mine}.sig`) return answered(() => res.writeHead(200).end(old.signature))
    return false
  }

  await refusal(t, tick(url), /older than version .* a replay/)

  // Expired: published to last 1 ms.
  serve = undefined
  await publish({web1: 'app: foo/channels/stable\nclasses: [z]\n'}, () => {}, 1)
  await new Promise((resolve) => setTimeout(resolve, 5))
  await refusal(t, tick(url), /expired at/)

  // Its documents withheld (404) once this node accepted one: no going back to the index, which could be an older one replayed.
  await publish({web1: 'app: foo/channels/stable\nclasses: [w]\n'})
  await rm(join(repo, 'nodes'), {recursive: true})
  const withheld = await t.throwsAsync(tick(url))
  t.is((withheld as LocalpuppetError).exitCode, 69)
  // What an operator of a pruned node reads: the likely causes, pruning first, and what to do for each.
  t.regex(withheld!.message, /^node web1's document \S+nodes\/[0-9a-f]{64}\.json is not found, though this node accepted its document version \d+ from \S+: most likely its input was removed from the repository \(publish --prune\), or the repository is being published or copied and is incomplete, or someone withholds the document; nothing taken from the repository's index \(this node keeps what it has\)$/)
  t.regex((withheld as LocalpuppetError).suggestions!.join('\n'), /a node taken out of the fleet: stop its timer .*publish --node web1 --input FILE/)
  // A repository without documents (published before them), to a node that never read one: the index, as before.
  t.is((await tick(url, 'web1', join(dir, 'fresh'))).text, 'app: foo/channels/stable\nclasses: [w]\n')
})

test("--node-documents-only: index.json lists no nodes; publishing one node's input writes that input and document only, not index.json; a promote, a removal, a renewal and repository list read the node table from the documents; a node's tick still works", async (t) => {
  const {repo, publish, tick} = await setup(t)
  await publish({web1: 'app: foo/channels/stable\n', web2: 'app: foo/channels/stable\n', db1: 'app: foo/tags/1.0.0\n'})
  await publish({}, (i) => (i.nodesInDocuments = true))
  const indexBytes = await readFile(join(repo, 'index.json'))
  const index = JSON.parse(indexBytes.toString())
  t.like(index, {nodeDocuments: true, nodesInDocuments: true})
  t.is(index.nodes, undefined)
  const web1 = await documentOf(repo, 'web1')

  // One node's input: its input and its document, nothing else.
  const updated = await publish({web2: 'app: foo/channels/stable\nclasses: [x]\n'})
  t.deepEqual(await readFile(join(repo, 'index.json')), indexBytes, 'index.json not rewritten')
  t.is(updated.version, index.version)
  t.deepEqual((await documentOf(repo, 'web1')).bytes, web1.bytes)
  t.is((await documentOf(repo, 'web2')).json.input.sha256, createHash('sha256').update('app: foo/channels/stable\nclasses: [x]\n').digest('hex'))

  // A node reads its document: on first contact the index (no nodes) gives the id.
  const {url} = await server(t, repo)
  t.is((await tick(url, 'web2')).text, 'app: foo/channels/stable\nclasses: [x]\n')
  // A name without a document: the index has no input for it, which is what a node older than documents says for every name (66).
  const none = await t.throwsAsync(tick(url, 'web3'))
  t.is((none as LocalpuppetError).exitCode, 66)
  t.regex(none!.message, /^node web3 has no input in the repository \S+; it lists no node inputs$/)

  // A promote: the index, and the documents of the channel's followers (read from the documents).
  await publish({}, (i) => (i.apps.foo.channels!.stable = '1.1.0'))
  t.notDeepEqual(await readFile(join(repo, 'index.json')), indexBytes)
  t.deepEqual((await documentOf(repo, 'web1')).json.apps.foo.channels, {stable: '1.1.0'})
  t.deepEqual(Object.keys((await documentOf(repo, 'db1')).json.apps.foo.tags), ['1.0.0'])
  t.is(JSON.parse(await readFile(join(repo, 'index.json'), 'utf8')).nodes, undefined)

  // A node removed: its document goes, the index stays.
  const beforeRemoval = await readFile(join(repo, 'index.json'))
  await publish({db1: null})
  t.deepEqual(await readFile(join(repo, 'index.json')), beforeRemoval)
  await t.throwsAsync(documentOf(repo, 'db1'), {code: 'ENOENT'})

  // repository list: the nodes, from their documents.
  const {listRepository} = await import('../../../../src/lib/channels/repository-listing.js')
  const listed = await listRepository(repo)
  t.deepEqual(listed.nodes!.map((n: {node: string}) => n.node), ['web1', 'web2'])
  t.is(listed.nodeInputsIn, 'documents', 'the mode is shown')

  // Publishing a plain input reads no document to look for encrypted ones, until one is encrypted: then the index says so (rewritten once).
  const {nodesForSealCheck} = await import('../../../../src/lib/repository/node-documents/node-table.js')
  const current = () => readFile(join(repo, 'index.json'), 'utf8').then((text) => JSON.parse(text) as RepositoryIndex)
  t.deepEqual(nodesForSealCheck(await current()), {})
  await publish({}, (i) => (i.nodes!.web2 = {...i.nodes!.web2, encrypted: 'age'}))
  t.true((await current()).encryptedInputs)
  t.is((await documentOf(repo, 'web2')).json.input.encrypted, 'age')

  // A renewal: the index and every document, with the new expiry.
  const renewedFrom = (await documentOf(repo, 'web2')).json.version
  await publish({})
  t.true((await documentOf(repo, 'web2')).json.version > renewedFrom)
  t.is((await documentOf(repo, 'web2')).json.expires, JSON.parse(await readFile(join(repo, 'index.json'), 'utf8')).expires)
})

test("a publisher killed at work leaves its marker: the next publish removes its temporary files in inputs/ and nodes/ as well; without one it looks no deeper than the root (a look into every node's directory would cost in proportion to the fleet)", async (t) => {
  const {repo, publish} = await setup(t)
  await publish({web1: 'app: foo/channels/stable\n'})
  const {spawnSync} = await import('node:child_process')
  const gone = spawnSync('true').pid
  const web1 = (await documentOf(repo, 'web1')).path
  const debris = [join(repo, 'inputs/web1', `.x.yaml.${gone}.0123abcd.tmp`), join(repo, 'nodes', `.${web1.split('/').pop()}.${gone}.0123abcd.tmp`), join(repo, `.index.json.${gone}.0123abcd.tmp`)]
  for (const file of debris) await writeFile(file, 'half')
  await publish({})
  const {existsSync} = await import('node:fs')
  t.deepEqual(debris.map((file) => existsSync(file)), [true, true, false], 'only the root is looked at')
  await writeFile(join(repo, `.localpuppet-publishing.${gone}`), '')
  await publish({})
  t.deepEqual(debris.map((file) => existsSync(file)), [false, false, false])
  t.deepEqual((await readdir(repo)).filter((name) => name.startsWith('.localpuppet-publishing')), [], 'the markers gone, the dead one and each publisher its own')
})
