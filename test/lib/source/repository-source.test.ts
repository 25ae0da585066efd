import {mkdir, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import test from 'ava'

import {LocalpuppetError} from '../../../src/lib/errors.js'
import {resolveInIndex} from '../../../src/lib/source/wanted-now.js'
import {type RepositoryIndex, inputPathFor, serializeRepositoryIndex} from '../../../src/lib/repository/repository-index.js'
import {fetchReleases, openSource} from '../../../src/lib/source/fetch.js'
import {tempDir} from '../../helpers/temp.js'

const SHA = 'c'.repeat(64)
const DIGEST = `sha256:${'d'.repeat(64)}`
const tag = (release: string) => ({archive: 'archives/x.tar.gz', size: 1, sha256: SHA, digest: DIGEST, modulepath: [release], digests: {[release]: DIGEST}, signedBy: null, publishedAt: '2026-11-25T00:00:00.000Z'})
const INDEX: RepositoryIndex = {
  format: 1,
  repository: 'a'.repeat(32),
  version: 1,
  expires: '2099-01-01T00:00:00.000Z',
  apps: {foo: {tags: {'1.0.0': tag('foo/tags/1.0.0')}, channels: {stable: '1.0.0'}}},
  nodes: {web1: {input: inputPathFor('web1', SHA), size: 1, sha256: SHA, app: 'foo/channels/stable', publishedAt: '2026-11-25T00:00:00.000Z'}},
}

/** An unsigned directory repository holding INDEX (no archives: nothing here gets as far as a download), and an empty module directory. */
async function repository(t: any): Promise<{repo: string; moduleDir: string}> {
  const dir = await tempDir(t)
  const repo = join(dir, 'repo')
  const moduleDir = join(dir, 'modules')
  await mkdir(repo)
  await mkdir(moduleDir)
  await writeFile(join(repo, 'index.json'), serializeRepositoryIndex(INDEX))
  return {repo, moduleDir}
}

// Names of Object.prototype's members are valid app, channel and node names: looked up in the
// parsed index as plain properties, they found a function where no entry is (exit 70).
test('a channel, node or app named like a member of every JavaScript object (constructor, toString) that the index does not list is 66, not a crash', async (t) => {
  const {repo, moduleDir} = await repository(t)
  const options = {moduleDir, trust: [], trustDir: null}
  for (const ref of ['foo/channels/constructor', 'constructor@^1', 'toString/tags/1.0.0', 'valueOf/channels/stable']) {
    const error = await t.throwsAsync(fetchReleases(repo, [ref], options))
    t.true(error instanceof LocalpuppetError, `${ref}: ${error!.stack}`)
    t.is((error as LocalpuppetError).exitCode, 66, ref)
  }

  const source = await openSource(repo, {})
  try {
    const error = await t.throwsAsync(source.nodeInput!('constructor', options))
    t.true(error instanceof LocalpuppetError, error!.stack)
    t.is((error as LocalpuppetError).exitCode, 66)
    t.regex(error!.message, /^node constructor has no input in the repository /)
  } finally {
    await source.close()
  }

  // fleet status --source resolves each node's app in the same index.
  t.deepEqual(resolveInIndex('foo/channels/constructor', INDEX), {release: null, why: 'foo/channels/constructor: not in the repository\'s index (no channel constructor of foo)'})
  t.deepEqual(resolveInIndex('constructor@^1', INDEX), {release: null, why: 'constructor@^1: the repository has no app constructor'})
})
