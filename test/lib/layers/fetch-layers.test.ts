import {existsSync} from 'node:fs'
import {chmod, mkdir, readFile} from 'node:fs/promises'
import {join} from 'node:path'

import test from 'ava'

import {LocalpuppetError} from '../../../src/lib/errors.js'
import {keepLayers} from '../../../src/lib/layers/fetch-layers.js'
import {tempDir} from '../../helpers/temp.js'

const layer = {name: 'site/dc1', bytes: Buffer.from('parameters: {a: 1}\n'), text: 'parameters: {a: 1}\n', sha256: 'a'.repeat(64), location: 'repo/layers/site/dc1/x.yaml'}

test('a node keeps fetched layers only in a directory nobody else can write (77 naming it, nothing written): another user could link site/ elsewhere and have root write there, or swap what the next offline run merges', async (t) => {
  const dir = await tempDir(t)
  await chmod(dir, 0o755)
  await mkdir(join(dir, 'layers/site'), {recursive: true})
  await chmod(join(dir, 'layers'), 0o777)
  const error = await t.throwsAsync(keepLayers(join(dir, 'layers'), [layer], false), {instanceOf: LocalpuppetError})
  t.is(error.exitCode, 77)
  t.regex(error.message, /layers/)
  t.false(existsSync(join(dir, 'layers/site/dc1.yaml')))

  // --allow-untrusted: kept, and the problem said.
  t.is((await keepLayers(join(dir, 'layers'), [layer], true)).length, 1)
  t.is(await readFile(join(dir, 'layers/site/dc1.yaml'), 'utf8'), layer.text)

  await chmod(join(dir, 'layers'), 0o755)
  t.deepEqual(await keepLayers(join(dir, 'layers'), [layer], false), [])
})

test("a layer the signed index lacks is refused (65) naming the repository without the source's credentials: the message goes into the run record and the node's reports", async (t) => {
  const {fetchNodeLayers} = await import('../../../src/lib/layers/fetch-layers.js')
  const {parseNodeInput} = await import('../../../src/lib/input/node-input.js')
  const input = parseNodeInput('app: web/tags/1.0.0\nlayers: [site/dc1]\n', 'input.yaml')
  const error = await t.throwsAsync(fetchNodeLayers(input, async () => null, 'https://deploy:s3cret@repo.example/web/'), {instanceOf: LocalpuppetError})
  t.is(error.exitCode, 65)
  t.is(error.message, 'input.yaml:2: layer node: layers: unknown layer site/dc1 (no site/dc1.yaml in https://repo.example/web/)')
})
