import test from 'ava'
import fc from 'fast-check'

import {InputError, LocalpuppetError, NotFoundError} from '../../../src/lib/errors.js'
import {parseLayer} from '../../../src/lib/layers/layer-file.js'
import {isValidLayerName} from '../../../src/lib/input/layer-name.js'
import {mergeLayers} from '../../../src/lib/layers/merge.js'
import {type LayerSource, resolveNamedLayers} from '../../../src/lib/layers/resolve-layers.js'
import {dumpYaml} from '../../../src/lib/yaml.js'

const RELEASE = 'classes:\n  ntp:\n    servers: [pool.ntp.org]\n    iburst: true\n  motd: ~\nparameters:\n  tier: default\n'
const SITE = 'classes:\n  ntp:\n    servers: [ntp1.dc1]\nparameters:\n  datacenter: dc1\n'
const NODE = 'app: web/tags/1.0.0\nlayers: [site/dc1]\nclasses:\n  ntp:\n    iburst: false\nparameters:\n  tier: gold\n'

function refusal(run: () => unknown): LocalpuppetError {
  try {
    run()
  } catch (error) {
    if (error instanceof LocalpuppetError) return error
    throw error
  }

  throw new Error('expected a refusal')
}

async function refusedAsync(run: () => Promise<unknown>): Promise<LocalpuppetError> {
  try {
    await run()
  } catch (error) {
    if (error instanceof LocalpuppetError) return error
    throw error
  }

  throw new Error('expected a refusal')
}

function memory(layers: Record<string, string>): LayerSource {
  return {label: 'layers/', read: async (name) => (name in layers ? {text: layers[name], file: `layers/${name}.yaml`} : null)}
}

test('release, then site, then node: a class parameter merges key by key, the later layer wins, every value keeps its layer, file and line', (t) => {
  const merged = mergeLayers([
    parseLayer(RELEASE, 'web/tags/1.0.0/layer.yaml', 'release web/tags/1.0.0'),
    parseLayer(SITE, 'layers/site/dc1.yaml', 'site/dc1'),
    parseLayer(NODE, 'nodes/web1.yaml', 'node', {extraKeys: ['app']}),
  ])
  t.deepEqual(merged.document, {
    classes: {ntp: {servers: ['ntp1.dc1'], iburst: false}, motd: {}},
    parameters: {tier: 'gold', datacenter: 'dc1'},
  })
  t.deepEqual(merged.origins.classes.ntp, {
    origin: {layer: 'release web/tags/1.0.0', file: 'web/tags/1.0.0/layer.yaml', line: 2},
    parameters: {servers: {layer: 'site/dc1', file: 'layers/site/dc1.yaml', line: 3}, iburst: {layer: 'node', file: 'nodes/web1.yaml', line: 5}},
  })
  t.deepEqual(merged.origins.parameters, {tier: {layer: 'node', file: 'nodes/web1.yaml', line: 7}, datacenter: {layer: 'site/dc1', file: 'layers/site/dc1.yaml', line: 5}})
  t.deepEqual(merged.layers.map((layer) => layer.name), ['release web/tags/1.0.0', 'site/dc1', 'node'])
  t.regex(merged.layers[1].digest, /^sha256:[\da-f]{64}$/)
})

test('remove drops a class, a class parameter, a parameter and the environment an earlier layer set; the same layer may set them anew', (t) => {
  const base = parseLayer('classes:\n  ntp: {servers: [a], iburst: true}\n  motd: ~\nparameters: {tier: x, zone: z}\nenvironment: staging\n', 'base.yaml', 'base')
  const over = parseLayer('remove: [classes.motd, classes.ntp.iburst, parameters.zone, environment, parameters.tier]\nparameters: {tier: [1, 2]}\n', 'over.yaml', 'over')
  const merged = mergeLayers([base, over])
  t.deepEqual(merged.document, {classes: {ntp: {servers: ['a']}}, parameters: {tier: [1, 2]}})
  t.is(merged.origins.environment, undefined)
})

test('a value whose kind changes between layers is refused naming both layers, files, lines and the key', (t) => {
  const error = refusal(() =>
    mergeLayers([parseLayer('classes:\n  ntp:\n    servers: [a]\n', 'r.yaml', 'release web/tags/1.0.0'), parseLayer('classes:\n  ntp:\n    servers: a\n', 'layers/site/dc1.yaml', 'site/dc1')]),
  )
  t.true(error instanceof InputError)
  t.is(error.exitCode, 65)
  t.is(error.message, 'layers/site/dc1.yaml:3: layer site/dc1: classes.ntp.servers is a scalar here but a list in layer release web/tags/1.0.0 (r.yaml:3); remove it first (remove: [classes.ntp.servers]) to change its kind')
})

test('a class that is a mapping in one layer and something else in another is refused at its line', (t) => {
  const error = refusal(() => parseLayer('classes:\n  ntp: [a]\n', 'layers/role/web.yaml', 'role/web'))
  t.is(error.exitCode, 65)
  t.is(error.message, 'layers/role/web.yaml:2: layer role/web: classes.ntp: a class is a mapping of parameter to value or nothing, got a list')
})

test('bad layer documents are refused with one line naming file, line, layer and key', (t) => {
  t.is(refusal(() => parseLayer('app: x/trunk\n', 'l.yaml', 'site/dc1')).message, 'l.yaml:1: layer site/dc1: unknown key "app"; allowed: layers, remove, classes, parameters, environment')
  t.is(refusal(() => parseLayer('remove:\n  - classes.Bad\n', 'l.yaml', 'site/dc1')).message, 'l.yaml:2: layer site/dc1: remove[0]: "classes.Bad" is not classes.NAME, classes.NAME.PARAM, parameters.NAME or environment')
  t.is(refusal(() => parseLayer('layers: [../etc/x]\n', 'l.yaml', 'site/dc1')).message, 'l.yaml:1: layer site/dc1: layers[0]: "../etc/x" is not a layer name (path-like: site/dc1, role/web)')
  t.is(refusal(() => parseLayer('layers: [site/dc1]\n', 'r/layer.yaml', 'release r/tags/1', {includes: false})).message, 'r/layer.yaml:1: layer release r/tags/1: unknown key "layers"; allowed: remove, classes, parameters, environment')
  t.is(refusal(() => parseLayer('parameters:\n  localpuppet_release: x\n', 'l.yaml', 'a')).message, 'l.yaml:2: layer a: parameters.localpuppet_release is set by localpuppet itself')
})

test('layer names are paths under the layers directory and never leave it', (t) => {
  for (const good of ['site/dc1', 'role/web-front', 'a', 'x/y.z/w_1']) t.true(isValidLayerName(good), good)
  for (const bad of ['../x', '/abs', 'a//b', 'Site', 'a/./b', 'a/..', 'x.yaml', '', 'a/', 3]) t.false(isValidLayerName(bad), String(bad))
})

test('included layers merge before the layer that names them, a layer named twice once; unknown layers and cycles are refused naming the line that named them', async (t) => {
  const source = memory({'site/dc1': 'layers: [base]\nparameters: {a: 1}\n', 'role/web': 'layers:\n  - base\nparameters: {a: 2}\n', base: 'parameters: {a: 0}\n'})
  const node = parseLayer('app: x/trunk\nlayers: [site/dc1, role/web]\n', 'n.yaml', 'node', {extraKeys: ['app']})
  const order = await resolveNamedLayers(node.includes, source)
  t.deepEqual(order.map((layer) => layer.name), ['base', 'site/dc1', 'role/web'])

  const unknown = await refusedAsync(() => resolveNamedLayers(parseLayer('layers:\n  - site/dc9\n', 'n.yaml', 'node').includes, source))
  t.is(unknown.exitCode, 65)
  t.is(unknown.message, 'n.yaml:2: layer node: layers: unknown layer site/dc9 (no site/dc9.yaml in layers/)')

  const cyclic = memory({a: 'layers: [b]\n', b: 'parameters: {x: 1}\nlayers:\n  - c\n', c: 'layers: [a]\n'})
  const cycle = await refusedAsync(() => resolveNamedLayers(parseLayer('layers: [a]\n', 'n.yaml', 'node').includes, cyclic))
  t.is(cycle.exitCode, 65)
  t.is(cycle.message, 'layers/c.yaml:1: layer c: layers: a includes itself (a -> b -> c -> a)')

  const nowhere = await refusedAsync(() => resolveNamedLayers(node.includes, null))
  t.true(nowhere instanceof NotFoundError)
  t.is(nowhere.message, 'n.yaml:2: layer node: layers: site/dc1: no layers directory to find it in (give --layers DIR or set layers_dir)')
})

// --- properties ------------------------------------------------------------------------------

const className = fc.constantFrom('ntp', 'motd', 'web::vhost', 'db')
const paramName = fc.constantFrom('port', 'servers', 'tier', 'mode')
const scalar = fc.oneof(fc.integer(), fc.string({maxLength: 8}), fc.boolean())
const layerDoc = fc.record(
  {
    classes: fc.dictionary(className, fc.option(fc.dictionary(paramName, scalar, {maxKeys: 3}), {nil: null}), {maxKeys: 3}),
    parameters: fc.dictionary(paramName, scalar, {maxKeys: 3}),
    remove: fc.array(fc.oneof(className.map((c) => `classes.${c}`), fc.tuple(className, paramName).map(([c, p]) => `classes.${c}.${p}`), paramName.map((p) => `parameters.${p}`)), {maxLength: 2}),
  },
  {requiredKeys: []},
)
const layerDocs = fc.array(layerDoc, {minLength: 1, maxLength: 5})
const lastIndex = <T>(items: T[], test: (item: T) => boolean): number => items.map((item) => test(item)).lastIndexOf(true)
const parsed = (docs: unknown[]) => docs.map((doc, n) => parseLayer(dumpYaml(doc), `l${n}.yaml`, `l${n}`))

test('property: the merged document depends on nothing but the layers and their order', (t) => {
  fc.assert(
    fc.property(layerDocs, (docs) => {
      const once = mergeLayers(parsed(docs))
      // Parsed again from text the other way round (reversed key order written): same layers, same result.
      const again = mergeLayers(parsed(structuredClone(docs)))
      t.deepEqual(once, again)
      t.is(JSON.stringify(once), JSON.stringify(again))
    }),
    {numRuns: 200},
  )
})

test('property: a later layer always wins: every value is the last one set after the last removal of it', (t) => {
  fc.assert(
    fc.property(layerDocs, (docs) => {
      const merged = mergeLayers(parsed(docs))
      for (const [name, value] of Object.entries(merged.document.parameters ?? {})) {
        const last = lastIndex(docs, (doc) => doc.parameters !== undefined && name in doc.parameters)
        t.deepEqual(value, docs[last].parameters![name])
        t.is(merged.origins.parameters[name].layer, `l${last}`)
        t.false(docs.slice(last + 1).some((doc) => doc.remove?.includes(`parameters.${name}`)))
      }

      for (const [cls, params] of Object.entries(merged.document.classes ?? {})) {
        for (const [param, value] of Object.entries(params)) {
          const last = lastIndex(docs, (doc) => doc.classes?.[cls]?.[param] !== undefined)
          t.deepEqual(value, docs[last].classes![cls]![param])
          t.is(merged.origins.classes[cls].parameters[param].layer, `l${last}`)
        }
      }
    }),
    {numRuns: 300},
  )
})

test('property: a layer that removes a class or key leaves none of it, whatever came before', (t) => {
  fc.assert(
    fc.property(layerDocs, className, paramName, (docs, cls, param) => {
      const merged = mergeLayers(parsed([...docs, {remove: [`classes.${cls}`, `parameters.${param}`]}]))
      t.false(cls in (merged.document.classes ?? {}))
      t.false(param in (merged.document.parameters ?? {}))
      const keyOnly = mergeLayers(parsed([...docs, {remove: [`classes.${cls}.${param}`]}]))
      t.false(param in (keyOnly.document.classes?.[cls] ?? {}))
      // Everything else is as it was.
      const without = mergeLayers(parsed(docs))
      t.deepEqual(Object.keys(keyOnly.document.classes ?? {}), Object.keys(without.document.classes ?? {}))
    }),
    {numRuns: 300},
  )
})

test('a node that would merge more than MAX_LAYERS layers is refused, however they include each other', async (t) => {
  const chain = Object.fromEntries(Array.from({length: 300}, (_, i) => [`l${i}`, i === 299 ? 'parameters: {x: 1}\n' : `layers: [l${i + 1}]\n`]))
  const error = await refusedAsync(() => resolveNamedLayers(parseLayer('layers: [l0]\n', 'n.yaml', 'node').includes, memory(chain)))
  t.is(error.exitCode, 65)
  t.regex(error.message, /^layers\/l255\.yaml:1: layer l255: layers: l256: more than 256 layers for one node$/)
})

test('property: a computed input (named layers merged in, removals kept) merged over the release layer gives what the full merge gives', async (t) => {
  const {computedNodeInput} = await import('../../../src/lib/layers/computed-input.js')
  const {parseNodeInput} = await import('../../../src/lib/input/node-input.js')
  await fc.assert(
    fc.asyncProperty(layerDoc, fc.array(layerDoc, {maxLength: 3}), layerDoc, async (release, named, node) => {
      const source = memory(Object.fromEntries(named.map((doc, n) => [`l${n}`, dumpYaml(doc)])))
      const text = dumpYaml({app: 'web/tags/1.0.0', layers: named.map((_, n) => `l${n}`), ...node})
      const input = parseNodeInput(text, 'n.yaml')
      const releaseLayer = parseLayer(dumpYaml(release), 'r.yaml', 'release')
      const full = mergeLayers([releaseLayer, ...(await resolveNamedLayers(parseLayer(text, 'n.yaml', 'node', {extraKeys: ['app']}).includes, source)), parseLayer(text, 'n.yaml', 'node', {extraKeys: ['app']})])
      const computed = await computedNodeInput(input, source)
      const again = mergeLayers([releaseLayer, parseLayer(computed.text, 'c.yaml', 'node', {extraKeys: ['app']})])
      t.deepEqual(again.document, full.document)
      t.is(parseNodeInput(computed.text, 'c.yaml').layers, undefined)
    }),
    {numRuns: 200},
  )
})

test("a node's !secret overrides a layer's plain default as the scalar it is (a string kept secret), and a mapping or list still conflicts with it", async (t) => {
  const {Secret} = await import('../../../src/lib/util/secret.js')
  const site = parseLayer('classes:\n  db:\n    password: changeme\n    options: {a: 1}\n', 'site.yaml', 'site/x')
  const node = parseLayer('app: web/tags/1.0.0\nclasses:\n  db:\n    password: !secret hunter2\n', 'n.yaml', 'node', {extraKeys: ['app']})
  const password = mergeLayers([site, node]).document.classes!.db.password
  t.true(password instanceof Secret)
  const mapping = parseLayer('app: web/tags/1.0.0\nclasses:\n  db:\n    options: !secret x\n', 'm.yaml', 'node', {extraKeys: ['app']})
  t.is(refusal(() => mergeLayers([site, mapping])).message, 'm.yaml:4: layer node: classes.db.options is a scalar here but a mapping in layer site/x (site.yaml:4); remove it first (remove: [classes.db.options]) to change its kind')
})
