import {createHash, generateKeyPairSync} from 'node:crypto'
import {mkdirSync, renameSync} from 'node:fs'
import {copyFile, mkdir, readFile, readdir, rm, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import test, {type ExecutionContext} from 'ava'

import {nodeDocumentPath} from '../../../../src/lib/repository/node-documents/document.js'
import {updateIndex} from '../../../../src/lib/repository/index-update.js'
import {signIndex} from '../../../../src/lib/archive/signature.js'
import {type RepositoryIndex, inputPathFor, serializeRepositoryIndex} from '../../../../src/lib/repository/repository-index.js'
import {tempDir} from '../../../helpers/temp.js'

const {privateKey} = generateKeyPairSync('ed25519')
const DIGEST = `sha256:${'d'.repeat(64)}`
const TAG = {archive: 'archives/foo/foo-1.0.0.tar.gz', size: 1, sha256: 'c'.repeat(64), digest: DIGEST, modulepath: ['foo/tags/1.0.0'], digests: {'foo/tags/1.0.0': DIGEST}, signedBy: null, publishedAt: '2026-11-25T00:00:00.000Z'}

/** A repository that publish and promote would write, driven through updateIndex: `set` node inputs by name (null removes). */
async function repository(t: ExecutionContext) {
  const repo = join(await tempDir(t), 'repo')
  /** Sets (or with null removes) one node's input as publish does: its file under inputs/, its entry. */
  const setInput = async (index: RepositoryIndex, node: string, text: string | null) => {
    if (text === null) return void delete index.nodes![node]
    const sha256 = createHash('sha256').update(text).digest('hex')
    const input = inputPathFor(node, sha256)
    await mkdir(join(repo, 'inputs', node), {recursive: true})
    await writeFile(join(repo, input), text)
    // Set on the table itself: a documents-only index's nodes are read and written through it (node-table.ts).
    index.nodes ??= {}
    index.nodes[node] = {input, size: text.length, sha256, app: 'foo/channels/stable', publishedAt: '2026-11-25T00:00:00.000Z'}
  }

  const publish = (set: Record<string, string | null>, change: (index: RepositoryIndex) => void = () => {}) =>
    updateIndex({repo, key: privateKey}, async (index) => {
      index.apps.foo ??= {tags: {'1.0.0': TAG}, channels: {stable: '1.0.0'}}
      for (const [node, text] of Object.entries(set)) await setInput(index, node, text)
      change(index)
      return {}
    })
  const id = async () => (JSON.parse(await readFile(join(repo, 'index.json'), 'utf8')) as RepositoryIndex).repository!
  const documents = async () => (await readdir(join(repo, 'nodes'))).sort()
  /** The file names under nodes/ of these nodes' documents and signatures. */
  const named = async (...nodes: string[]) => {
    const repository = await id()
    return nodes.flatMap((node) => [nodeDocumentPath(repository, node).slice('nodes/'.length)]).flatMap((name) => [name, `${name}.sig`]).sort()
  }

  return {repo, publish, id, documents, named}
}

test("a removed node's document left behind by a publisher killed between index.json and the documents' removal (or by a publisher older than documents pruning it) is removed by the next publish: no stale signed document stays readable", async (t) => {
  const {repo, publish, id, documents, named} = await repository(t)
  await publish({web1: 'app: foo/channels/stable\n', web2: 'app: foo/channels/stable\n'})
  const web2 = join(repo, nodeDocumentPath(await id(), 'web2'))
  const kept = join(repo, 'kept')
  await copyFile(web2, kept)
  await copyFile(`${web2}.sig`, `${kept}.sig`)
  await publish({web2: null})
  t.deepEqual(await documents(), await named('web1'))
  // What a kill -9 after index.json's rename and before removeStale leaves: web2 gone from the index, its signed document still served.
  await copyFile(kept, web2)
  await copyFile(`${kept}.sig`, `${web2}.sig`)
  await publish({}, (index) => (index.apps.foo.channels!.stable = '1.0.0'))
  t.deepEqual(await documents(), await named('web1'), "web2's stale document is removed by the next publish")

  // The same with a publish of one node's input (not all documents rewritten).
  await copyFile(kept, web2)
  await copyFile(`${kept}.sig`, `${web2}.sig`)
  await publish({web1: 'app: foo/channels/stable\nclasses: [x]\n'})
  t.deepEqual(await documents(), await named('web1'))

  // A publisher older than documents prunes web2: it rewrites index.json without it (and without nodeDocuments, which it does not know), re-signed.
  await publish({web2: 'app: foo/channels/stable\n'})
  const index = JSON.parse(await readFile(join(repo, 'index.json'), 'utf8')) as RepositoryIndex
  delete index.nodes!.web2
  delete index.nodeDocuments
  const bytes = serializeRepositoryIndex(index)
  await writeFile(join(repo, 'index.json.sig'), signIndex(bytes, privateKey))
  await writeFile(join(repo, 'index.json'), bytes)
  await publish({web1: 'app: foo/channels/stable\nclasses: [y]\n'})
  t.deepEqual(await documents(), await named('web1'))
})

test("a publish that fails after writing documents and before index.json (here: index.json.sig cannot be replaced) puts the documents back as the index says; one killed there (what it leaves: a document of its input, nodes/.unfinished naming it) is repaired by the next publish, of another node", async (t) => {
  const {repo, publish, id} = await repository(t)
  await publish({web1: 'app: foo/channels/stable\n', web2: 'app: foo/channels/stable\n'})
  const path = join(repo, nodeDocumentPath(await id(), 'web1'))
  const committed = JSON.parse(await readFile(path, 'utf8'))
  await t.throwsAsync(
    publish({web1: 'app: foo/channels/stable\nclasses: [never]\n'}, () => {
      // index.json.sig becomes a non-empty directory: renaming the new signature over it fails, after the documents are written.
      mkdirSync(join(repo, 'index.json.sig.d'))
      renameSync(join(repo, 'index.json.sig'), join(repo, 'index.json.sig.d', 'x'))
      renameSync(join(repo, 'index.json.sig.d'), join(repo, 'index.json.sig'))
    }),
  )
  const back = JSON.parse(await readFile(path, 'utf8'))
  t.deepEqual(back.input, committed.input, "web1's document says what the index says, not the input of the publish that failed")
  t.true(back.version > committed.version)
  renameSync(join(repo, 'index.json.sig', 'x'), join(repo, 'sig'))
  await rm(join(repo, 'index.json.sig'), {recursive: true})
  renameSync(join(repo, 'sig'), join(repo, 'index.json.sig'))

  // Killed between the documents and the index: web1's new document is there, index.json is the one before, nodes/.unfinished names the document.
  const index = await readFile(join(repo, 'index.json'))
  const signature = await readFile(join(repo, 'index.json.sig'))
  await publish({web1: 'app: foo/channels/stable\nclasses: [killed]\n'})
  await writeFile(join(repo, 'index.json.sig'), signature)
  await writeFile(join(repo, 'index.json'), index)
  await writeFile(join(repo, 'nodes', '.unfinished'), `${nodeDocumentPath(await id(), 'web1').slice('nodes/'.length)}\n`)
  await publish({web2: 'app: foo/channels/stable\nclasses: [x]\n'})
  const repaired = JSON.parse(await readFile(path, 'utf8'))
  t.deepEqual(repaired.input, (JSON.parse(index.toString()) as RepositoryIndex).nodes!.web1)
  t.deepEqual(repaired.input, committed.input)
})

test("a promote whose third document cannot be written (its path is a directory) fails and leaves the other followers' documents as the index says: no node follows a promote that did not happen", async (t) => {
  const {repo, publish, id} = await repository(t)
  await publish({web1: 'app: foo/channels/stable\n', web2: 'app: foo/channels/stable\n', db1: 'app: foo/channels/stable\n'}, (index) => (index.apps.foo.tags['1.1.0'] = {...TAG, archive: 'archives/foo/foo-1.1.0.tar.gz', modulepath: ['foo/tags/1.1.0'], digests: {'foo/tags/1.1.0': DIGEST}}))
  const repositoryId = await id()
  const blocked = join(repo, nodeDocumentPath(repositoryId, 'db1'))
  await rm(blocked)
  await mkdir(join(blocked, 'x'), {recursive: true})
  await t.throwsAsync(publish({}, (index) => (index.apps.foo.channels!.stable = '1.1.0')))
  for (const node of ['web1', 'web2']) {
    const document = JSON.parse(await readFile(join(repo, nodeDocumentPath(repositoryId, node)), 'utf8'))
    t.deepEqual(document.apps.foo.channels, {stable: '1.0.0'}, node)
  }

  t.is(JSON.parse(await readFile(join(repo, 'index.json'), 'utf8')).apps.foo.channels.stable, '1.0.0')
})

test('two publishes at once (the repository lock) of two nodes, on a repository listing its nodes and on a --node-documents-only one: both inputs are published, each document says its own, the index lists both', async (t) => {
  for (const documentsOnly of [false, true]) {
    const {repo, publish, id} = await repository(t)
    await publish({web1: 'app: foo/channels/stable\n'}, (index) => void (documentsOnly && (index.nodesInDocuments = true)))
    await Promise.all([publish({web1: 'app: foo/channels/stable\nclasses: [a]\n'}), publish({web2: 'app: foo/channels/stable\nclasses: [b]\n'}), publish({}, (index) => (index.apps.foo.tags['1.0.0'] = {...TAG, publishedAt: '2026-11-26T00:00:00.000Z'}))])
    const repositoryId = await id()
    const read = async (node: string) => JSON.parse(await readFile(join(repo, nodeDocumentPath(repositoryId, node)), 'utf8'))
    const index = JSON.parse(await readFile(join(repo, 'index.json'), 'utf8')) as RepositoryIndex
    for (const [node, size] of [['web1', 38], ['web2', 38]] as const) {
      const document = await read(node)
      t.is(document.input.size, size, `${node}, documents only: ${documentsOnly}`)
      t.is(document.apps.foo.tags['1.0.0'].publishedAt, '2026-11-26T00:00:00.000Z')
      if (!documentsOnly) t.deepEqual(index.nodes![node], document.input)
    }
  }
})

test("a change that replaces a documents-only index's node table (index.nodes = {...}) instead of setting entries in it is a bug that fails the publish, not a publish that silently publishes nothing of it", async (t) => {
  const {repo, publish, id} = await repository(t)
  await publish({web1: 'app: foo/channels/stable\n'}, (index) => void (index.nodesInDocuments = true))
  const path = join(repo, nodeDocumentPath(await id(), 'web1'))
  const before = await readFile(path)
  const error = await t.throwsAsync(publish({}, (index) => (index.nodes = {...index.nodes, web1: {...index.nodes!.web1, size: 99}})))
  t.regex(error!.message, /index\.nodes was replaced by the change/)
  t.deepEqual(await readFile(path), before)
})
