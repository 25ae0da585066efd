import {existsSync} from 'node:fs'
import {symlink} from 'node:fs/promises'
import {join} from 'node:path'

import test from 'ava'

import {LocalpuppetError} from '../../../src/lib/errors.js'
import {checkLayersDir, layerPathFor} from '../../../src/lib/layers/published-layers.js'
import {publishArchives} from '../../../src/lib/repository/publish.js'
import {emptyRepositoryIndex, parseRepositoryIndex, serializeRepositoryIndex} from '../../../src/lib/repository/repository-index.js'
import {tempDir, writeTree} from '../../helpers/temp.js'

const SHA = 'a'.repeat(64)

test('publish --layers checks every layer before the repository is touched: includes found in DIR, no links, not empty', async (t) => {
  const dir = await tempDir(t)
  await writeTree(dir, {'ok/site/dc1.yaml': 'layers: [common]\n', 'ok/common.yaml': 'parameters: {a: 1}\n', 'bad/site/dc1.yaml': 'layers:\n  - common\n', 'empty/README': 'x\n'})
  t.deepEqual((await checkLayersDir(join(dir, 'ok'))).map((layer) => layer.name), ['common', 'site/dc1'])
  const unknown = await t.throwsAsync(checkLayersDir(join(dir, 'bad')), {instanceOf: LocalpuppetError})
  t.is(unknown.exitCode, 65)
  t.is(unknown.message, `${join(dir, 'bad/site/dc1.yaml')}:2: layer site/dc1: layers: unknown layer common (no common.yaml in ${join(dir, 'bad')})`)
  t.is((await t.throwsAsync(checkLayersDir(join(dir, 'empty')), {instanceOf: LocalpuppetError})).exitCode, 66)
  await symlink('/etc/passwd', join(dir, 'ok/site/dc2.yaml'))
  const link = await t.throwsAsync(checkLayersDir(join(dir, 'ok')), {instanceOf: LocalpuppetError})
  t.is(link.exitCode, 65)
  t.is(link.message, `--layers ${join(dir, 'ok')}: site/dc2.yaml is not a regular file; only regular files are published (nothing published)`)
})

test("the index's layers are optional and checked as the rest of a hostile index: a path elsewhere, a bad name or size is refused (65)", (t) => {
  const index = {...emptyRepositoryIndex(), layers: {'site/dc1': {layer: layerPathFor('site/dc1', SHA), size: 10, sha256: SHA, publishedAt: '2026-01-01T00:00:00.000Z'}}}
  t.deepEqual(parseRepositoryIndex(serializeRepositoryIndex(index), 'index.json').layers, index.layers)
  t.is(parseRepositoryIndex(serializeRepositoryIndex(emptyRepositoryIndex()), 'index.json').layers, undefined)
  const refused = (layers: unknown) => t.throws(() => parseRepositoryIndex(Buffer.from(JSON.stringify({...emptyRepositoryIndex(), layers})), 'index.json'), {instanceOf: LocalpuppetError})!.message
  t.is(refused({'site/dc1': {layer: `inputs/web1/${SHA}.yaml`, size: 10, sha256: SHA}}), `index.json: layer "site/dc1": path "inputs/web1/${SHA}.yaml" is not layers/site/dc1/${SHA}.yaml`)
  t.is(refused({'../x': {layer: layerPathFor('../x', SHA), size: 10, sha256: SHA}}), 'index.json: layer "../x": invalid layer name')
  t.is(refused({'site/dc1': {layer: layerPathFor('site/dc1', SHA), size: 1e9, sha256: SHA}}), 'index.json: layer "site/dc1": invalid size 1000000000')
  t.is(refused([]), 'index.json: layers is not an object')
})

test('a node input naming a layer the repository does not have is refused (66) naming the node, file and line; nothing is published', async (t) => {
  const dir = await tempDir(t)
  await writeTree(dir, {'nodes/web1.yaml': 'app: foo/tags/1.0.0\nlayers:\n  - site/dc1\n'})
  const error = await t.throwsAsync(publishArchives({repo: join(dir, 'repo'), archives: [], nodes: [{node: 'web1', file: join(dir, 'nodes/web1.yaml')}]}), {instanceOf: LocalpuppetError})
  t.is(error.exitCode, 66)
  t.is(error.message, `${join(dir, 'nodes/web1.yaml')}:3: node web1 names layer site/dc1, which the repository does not have`)
  t.false(existsSync(join(dir, 'repo/index.json')))
})

test('publish --layers refuses a layer larger than a node reads (1 MiB) with 65 naming it, nothing published: the index would list a size every node refuses', async (t) => {
  const dir = await tempDir(t)
  await writeTree(dir, {'layers/site/big.yaml': `parameters:\n  blob: "${'x'.repeat(1024 * 1024)}"\n`})
  const error = await t.throwsAsync(publishArchives({repo: join(dir, 'repo'), archives: [], layers: join(dir, 'layers')}), {instanceOf: LocalpuppetError})
  t.is(error.exitCode, 65)
  t.is(error.message, `${join(dir, 'layers/site/big.yaml')}: layer site/big is larger than 1 MiB, the most a node reads of a layer (nothing published)`)
  t.false(existsSync(join(dir, 'repo/index.json')))
})

test('publish --computed refuses a computed document larger than a node reads (1 MiB) with 65 naming the node, nothing published: layers of 600 KB each merge into more', async (t) => {
  const dir = await tempDir(t)
  const big = (name: string) => `parameters:\n  ${name}: "${'x'.repeat(600 * 1024)}"\n`
  await writeTree(dir, {'layers/site/a.yaml': big('a'), 'layers/site/b.yaml': big('b'), 'nodes/web1.yaml': 'app: foo/tags/1.0.0\nlayers: [site/a, site/b]\n'})
  const error = await t.throwsAsync(publishArchives({repo: join(dir, 'repo'), archives: [], nodes: [{node: 'web1', file: join(dir, 'nodes/web1.yaml')}], layers: join(dir, 'layers'), computed: true}), {instanceOf: LocalpuppetError})
  t.is(error.exitCode, 65)
  t.regex(error.message, /^node web1 \(.*nodes\/web1\.yaml\): its document is 1228\d{3} bytes, more than the 1 MiB a node reads of its input \(nothing published\)$/)
  t.false(existsSync(join(dir, 'repo/index.json')))
})

test('publish --layers refuses a linked directory (65 naming it, nothing published): it was skipped, while the includes it held were found through it, so role/web was published naming a site/dc1 the repository never had', async (t) => {
  const dir = await tempDir(t)
  await writeTree(dir, {'layers/role/web.yaml': 'layers: [site/dc1]\n', 'elsewhere/site/dc1.yaml': 'parameters: {a: 1}\n'})
  await symlink(join(dir, 'elsewhere/site'), join(dir, 'layers/site'))
  const error = await t.throwsAsync(publishArchives({repo: join(dir, 'repo'), archives: [], layers: join(dir, 'layers')}), {instanceOf: LocalpuppetError})
  t.is(error.exitCode, 65)
  t.is(error.message, `--layers ${join(dir, 'layers')}: site is a symbolic link; only regular files and directories are published (nothing published)`)
  t.false(existsSync(join(dir, 'repo/index.json')))
})
