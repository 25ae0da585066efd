import {createHash, generateKeyPairSync} from 'node:crypto'
import {cp, mkdir, readFile, rm, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import test, {type ExecutionContext} from 'ava'

import {signIndex} from '../../../../src/lib/archive/signature.js'
import {LocalpuppetError} from '../../../../src/lib/errors.js'
import {buildNodeDocument, nodeDocumentPath, serializeNodeDocument, signNodeDocument} from '../../../../src/lib/repository/node-documents/document.js'
import {updateIndex} from '../../../../src/lib/repository/index-update.js'
import {type RepositoryIndex, inputPathFor} from '../../../../src/lib/repository/repository-index.js'
import {openSource} from '../../../../src/lib/source/fetch.js'
import {head, hostileServer, pour} from '../../../helpers/hostile-server.js'
import {tempDir} from '../../../helpers/temp.js'

const {privateKey, publicKey} = generateKeyPairSync('ed25519')
const DIGEST = `sha256:${'d'.repeat(64)}`
const TAG = {archive: 'archives/foo/foo-1.0.0.tar.gz', size: 1, sha256: 'c'.repeat(64), digest: DIGEST, modulepath: ['foo/tags/1.0.0'], digests: {'foo/tags/1.0.0': DIGEST}, signedBy: null, publishedAt: '2026-11-25T00:00:00.000Z'}
const TEXT = {web1: 'app: foo/channels/stable\n', web2: 'app: foo/channels/stable\nclasses: [web2]\n'}

/**
 * A signed repository with web1 and web2, a mirror of it (a directory the attacker controls),
 * and web1's tick against the mirror (its input read as apply --fetch reads it).
 */
async function mirrored(t: ExecutionContext) {
  const dir = await tempDir(t)
  const repo = join(dir, 'repo')
  const mirror = join(dir, 'mirror')
  const moduleDir = join(dir, 'modules')
  await mkdir(moduleDir, {mode: 0o755})
  const pub = join(dir, 'release.pub.pem')
  await writeFile(pub, publicKey.export({type: 'spki', format: 'pem'}))
  await updateIndex({repo, key: privateKey}, async (index) => {
    index.apps.foo = {tags: {'1.0.0': TAG}, channels: {stable: '1.0.0'}}
    for (const [node, text] of Object.entries(TEXT)) {
      const sha256 = createHash('sha256').update(text).digest('hex')
      await mkdir(join(repo, 'inputs', node), {recursive: true})
      await writeFile(join(repo, inputPathFor(node, sha256)), text)
      index.nodes = {...index.nodes, [node]: {input: inputPathFor(node, sha256), size: text.length, sha256, app: 'foo/channels/stable', publishedAt: '2026-11-25T00:00:00.000Z'}}
    }

    return {}
  })
  const index = JSON.parse(await readFile(join(repo, 'index.json'), 'utf8')) as RepositoryIndex
  const web1 = join(mirror, nodeDocumentPath(index.repository!, 'web1'))
  const tick = async () => {
    const source = await openSource(mirror, {})
    try {
      return await source.nodeInput!('web1', {moduleDir, trust: [pub], trustDir: null})
    } finally {
      await source.close()
    }
  }

  /** The mirror as the repository is, then web1's first tick: the node has accepted the index and its document. */
  await cp(repo, mirror, {recursive: true})
  t.is((await tick()).text, TEXT.web1)
  return {repo, mirror, index, web1, tick}
}

/** Refused as a hostile answer is: a LocalpuppetError, exit 65, saying `message`. */
const refused = async (t: ExecutionContext, promise: Promise<unknown>, message: RegExp) => t.is((await t.throwsAsync<LocalpuppetError>(promise, {instanceOf: LocalpuppetError, message}))?.exitCode, 65)

test("a mirror serving, at a node's document path, the signed index, a document signed as an index is, an unsigned document, or another repository's document signed by the same key: each refused (65 naming the document)", async (t) => {
  const {mirror, index, web1, tick} = await mirrored(t)
  const where = /^\S+nodes\/[0-9a-f]{64}\.json: /
  // The signed index and its signature.
  await cp(join(mirror, 'index.json'), web1)
  await cp(join(mirror, 'index.json.sig'), `${web1}.sig`)
  await refused(t, tick(), where)

  // web1's genuine document, its signature over the bytes alone (as an index's is): the prefix differs.
  const genuine = serializeNodeDocument(buildNodeDocument(index, 'web1', Date.now() + 10, index.expires!)!)
  await writeFile(web1, genuine)
  await writeFile(`${web1}.sig`, signIndex(genuine, privateKey))
  await refused(t, tick(), where)

  // Unsigned.
  await rm(`${web1}.sig`)
  await refused(t, tick(), /not signed, and trusted keys are configured; refused$/)

  // Another repository's document for web1 (the same key signs both), at this repository's path.
  const other = serializeNodeDocument(buildNodeDocument({...index, repository: 'f'.repeat(32)}, 'web1', Date.now() + 20, index.expires!)!)
  await writeFile(web1, other)
  await writeFile(`${web1}.sig`, signNodeDocument(other, privateKey))
  await refused(t, tick(), /repository: of repository f{32}, not [0-9a-f]{32}/)
})

test("a mirror serving another input than the document names (web2's, or altered bytes) is refused (65), the input named by its path", async (t) => {
  const {mirror, index, tick} = await mirrored(t)
  const mine = join(mirror, index.nodes!.web1.input)
  await cp(join(mirror, index.nodes!.web2.input), mine)
  await refused(t, tick(), /inputs\/web1\/[0-9a-f]{64}\.yaml: input of node web1 does not match the signed index/)
  await writeFile(mine, TEXT.web1.replace('stable', 'canary'))
  await refused(t, tick(), /input of node web1 does not match/)
})

test("over http: a 304 for a node's document when the node kept none, and a document that never ends, are refused (65 naming the document)", async (t) => {
  const {mirror, index} = await mirrored(t)
  const document = nodeDocumentPath(index.repository!, 'web1')
  let hostile: 'not-modified' | 'endless' = 'not-modified'
  const server = await hostileServer(async (path, socket) => {
    if (path === `/${document}`) {
      if (hostile === 'not-modified') return void socket.end(head(304, {etag: '"x"'}))
      socket.write(head(200))
      return pour(socket, Buffer.alloc(64 * 1024, 0x20))
    }

    const body = await readFile(join(mirror, path)).catch(() => null)
    socket.end(body === null ? head(404, {'content-length': 0}) : Buffer.concat([head(200, {'content-length': body.length}), body]))
  })
  t.teardown(() => server.close())
  const dir = await tempDir(t)
  const fresh = async () => {
    const moduleDir = join(dir, `modules-${hostile}`)
    await mkdir(moduleDir, {mode: 0o755})
    const source = await openSource(server.url, {})
    try {
      await source.nodeInput!('web1', {moduleDir, trust: [join(mirror, '..', 'release.pub.pem')], trustDir: null})
    } finally {
      await source.close()
    }
  }

  await refused(t, fresh(), /nodes\/[0-9a-f]{64}\.json: .*304 Not Modified.*refused/)
  hostile = 'endless'
  await refused(t, fresh(), /nodes\/[0-9a-f]{64}\.json: /)
})
