import test from 'ava'

import {LocalpuppetError} from '../../../src/lib/errors.js'
import {type LayerSource, resolveNamedLayers} from '../../../src/lib/layers/resolve-layers.js'
import {parseLayer} from '../../../src/lib/layers/layer-file.js'

// Nine layers of nearly 1 MiB, each one a repository serves (a layer is at most 1 MiB): merged, 9 MiB.
const big = (i: number) => `parameters:\n  p${i}: "${'x'.repeat(1024 * 1024 - 100)}"\n`
const source: LayerSource = {label: 'repo', read: async (name) => ({text: big(Number(name.slice(1))), file: `${name}.yaml`})}

test("a node's named layers adding up to more than 8 MiB are refused (65) naming the layer that crosses it: each within its own bound, together they made a node hold gigabytes and write a document of any size", async (t) => {
  const names = Array.from({length: 9}, (_, i) => `l${i}`)
  const own = parseLayer(`layers: [${names.join(', ')}]\n`, 'input.yaml', 'node')
  const error = await t.throwsAsync(resolveNamedLayers(own.includes, source), {instanceOf: LocalpuppetError})
  t.is(error.exitCode, 65)
  t.is(error.message, 'input.yaml:1: layer node: layers: l8: the layers of one node add up to more than 8 MiB')
  t.is((await resolveNamedLayers(own.includes.slice(0, 8), source)).length, 8)
})
