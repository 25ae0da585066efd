import {readFile, readdir, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import test from 'ava'

import {LocalpuppetError} from '../../../src/lib/errors.js'
import {updateIndex} from '../../../src/lib/repository/index-update.js'
import {MAX_REPOSITORY_INDEX_BYTES, type RepositoryIndex, inputPathFor, serializeRepositoryIndex} from '../../../src/lib/repository/repository-index.js'
import {tempDir} from '../../helpers/temp.js'

const entry = (node: string, n: number) => {
  const sha256 = n.toString(16).padStart(64, '0')
  return {input: inputPathFor(node, sha256), size: 30, sha256, app: 'foo/tags/1.0.0', publishedAt: '2026-11-22T00:00:00.000Z'}
}

test("an update whose index.json would be over the bound every node reads is refused before anything is written (65, naming the file and --node-documents-only); it was written, and every node then refused it", async (t) => {
  const repo = await tempDir(t)
  // A repository whose index lists node inputs up to just under the bound.
  const index: RepositoryIndex = {format: 1, repository: 'a'.repeat(32), version: 1, expires: '2099-01-01T00:00:00.000Z', apps: {}, nodes: {}}
  const perNode = serializeRepositoryIndex({...index, nodes: {'node1.example.com': entry('node1.example.com', 1)}}).length - serializeRepositoryIndex(index).length
  const count = Math.floor((MAX_REPOSITORY_INDEX_BYTES - 4096) / perNode)
  for (let i = 1; i <= count; i++) index.nodes![`node${i}.example.com`] = entry(`node${i}.example.com`, i)
  const before = serializeRepositoryIndex(index)
  t.true(before.length <= MAX_REPOSITORY_INDEX_BYTES)
  await writeFile(join(repo, 'index.json'), before)
  // Enough more to pass the bound (an entry is about 300 bytes).
  const extra = Math.ceil((MAX_REPOSITORY_INDEX_BYTES - before.length) / 250) + 10
  const error = await t.throwsAsync(
    updateIndex({repo, key: null}, async (next) => {
      for (let i = 1; i <= extra; i++) next.nodes![`extra${i}.example.com`] = entry(`extra${i}.example.com`, i)
    }),
  )
  t.is((error as LocalpuppetError).exitCode, 65)
  t.regex(error!.message, new RegExp(`index\\.json would be \\d+ bytes, over the ${MAX_REPOSITORY_INDEX_BYTES} a node reads \\(${count + extra} node inputs listed\\); nothing published`))
  t.regex((error as LocalpuppetError).suggestions.join('\n'), /--node-documents-only/)
  t.true((await readFile(join(repo, 'index.json'))).equals(before), 'index.json as it was')
  t.deepEqual((await readdir(repo)).filter((name) => !name.startsWith('.localpuppet-publish')).sort(), ['index.json'], 'no node document, no stray file')
})

test("the first update that writes node documents marks index.json nodeDocuments: true, so nodes read their documents (the mark was set after the index was serialized, and lost)", async (t) => {
  const repo = await tempDir(t)
  await writeFile(join(repo, 'index.json'), serializeRepositoryIndex({format: 1, repository: 'b'.repeat(32), version: 1, expires: '2099-01-01T00:00:00.000Z', apps: {}}))
  const updated = await updateIndex({repo, key: null}, async (next) => {
    next.nodes = {'web1.example.com': entry('web1.example.com', 1)}
  })
  t.like(JSON.parse(await readFile(join(repo, 'index.json'), 'utf8')), {version: 2, nodeDocuments: true})
  t.like(updated, {indexWritten: true, nodeDocuments: {written: 1, removed: 0}})
})
