import test from 'ava'

import {LocalpuppetError} from '../../../../src/lib/errors.js'
import {buildNodeDocument, parseNodeDocument, serializeNodeDocument} from '../../../../src/lib/repository/node-documents/document.js'
import {type RepositoryIndex, inputPathFor} from '../../../../src/lib/repository/repository-index.js'

const REPO = 'a'.repeat(32)
const DIGEST = `sha256:${'b'.repeat(64)}`
const index: RepositoryIndex = {
  format: 1,
  repository: REPO,
  version: 7,
  expires: '2099-01-01T00:00:00.000Z',
  apps: {foo: {tags: {'1.0.0': {archive: 'archives/foo/foo-1.0.0.tar.gz', size: 10, sha256: 'a'.repeat(64), digest: DIGEST, modulepath: ['foo/tags/1.0.0'], digests: {'foo/tags/1.0.0': DIGEST}, signedBy: null, publishedAt: '2026-11-22T00:00:00.000Z'}}}},
  nodes: {web1: {input: inputPathFor('web1', 'c'.repeat(64)), size: 30, sha256: 'c'.repeat(64), app: 'foo/tags/1.0.0', publishedAt: '2026-11-22T00:00:00.000Z'}},
}

/** `{"a":{"a":...1...}}` nested `depth` times, as text: well within a node document's 2 MiB. */
const nested = (depth: number) => `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`

test('a document nested too deeply for the engine (200,000 levels under input, a layer or a tag, inside 2 MiB) is refused (65 naming the file), not a crash (70)', (t) => {
  const text = serializeNodeDocument(buildNodeDocument(index, 'web1', 5, '2099-01-01T00:00:00.000Z')!).toString()
  const places = [
    text.replace('"input":{', `"input":{"deep":${nested(200_000)},`),
    text.replace('"layers":{}', `"layers":{"x":${nested(200_000)}}`),
    text.replace('"1.0.0":{', `"1.0.0":{"deep":${nested(200_000)},`),
  ]
  for (const bytes of places) {
    t.true(bytes.length < 2 * 1024 * 1024)
    const error = t.throws(() => parseNodeDocument(Buffer.from(bytes), 'http://r/nodes/x.json', {node: 'web1', repository: REPO}))
    t.true(error instanceof LocalpuppetError, String(error))
    t.is((error as LocalpuppetError).exitCode, 65)
    t.regex(error!.message, /^http:\/\/r\/nodes\/x\.json: .*refused$/)
  }
})
