import {createHash} from 'node:crypto'
import type {Dirent} from 'node:fs'
import {mkdir, readdir} from 'node:fs/promises'
import {dirname, join} from 'node:path'

import {InputError, NotFoundError, describeFsError} from '../errors.js'
import {writeFileAtomic} from '../util/atomic-write.js'
import {isMapping} from '../util/json.js'
import {own} from '../util/own.js'
import {terminalText} from '../util/terminal-text.js'
import {parseLayer} from './layer-file.js'
import {isValidLayerName} from '../input/layer-name.js'
import {directoryLayers, resolveNamedLayers} from './resolve-layers.js'

/**
 * A layer published into the repository (`publish --layers DIR`): stored by content at
 * `layers/NAME/<sha256>.yaml`, its sha256 in the signed index, so a node verifies the
 * bytes it downloads. The index's `layers` field is optional: a node that predates it
 * ignores it (and refuses an input naming layers: `unknown key "layers"`).
 */
export interface PublishedLayer {
  layer: string
  size: number
  sha256: string
  publishedAt: string
}

/** A layer is at most this large (as a node input is). */
export const MAX_LAYER_BYTES = 1024 * 1024

/** The repository's path for a layer: `layers/site/dc1/<sha256>.yaml`. */
export function layerPathFor(name: string, sha256: string): string {
  return `layers/${name}/${sha256}.yaml`
}

/** Checks an index's `layers` entries as parseRepositoryIndex checks the rest (65 through `fail`): names, paths exactly where publish puts them, sizes, hashes. */
export function checkIndexLayers(layers: unknown, fail: (why: string) => never): void {
  if (layers === undefined) return
  if (!isMapping(layers)) fail('layers is not an object')
  for (const [name, published] of Object.entries(layers)) {
    const where = `layer ${JSON.stringify(name)}`
    if (!isValidLayerName(name)) fail(`${where}: invalid layer name`)
    if (!isMapping(published)) fail(`${where}: not an object`)
    const p = published as Partial<PublishedLayer>
    if (typeof p.sha256 !== 'string' || !/^[0-9a-f]{64}$/.test(p.sha256)) fail(`${where}: invalid sha256`)
    if (p.layer !== layerPathFor(name, p.sha256!)) fail(`${where}: path ${JSON.stringify(p.layer)} is not ${layerPathFor(name, p.sha256!)}`)
    if (!Number.isSafeInteger(p.size) || p.size! < 0 || p.size! > MAX_LAYER_BYTES) fail(`${where}: invalid size ${JSON.stringify(p.size)}`)
  }
}

/** A layer read from `--layers DIR`, checked, ready to publish. */
export interface CheckedLayer {
  name: string
  file: string
  bytes: Buffer
  sha256: string
}

/**
 * Every layer in `dir` (`site/dc1.yaml` is layer `site/dc1`), each parsed as a run parses
 * it and its includes resolved within the directory (unknown layer, cycle: 65 naming the
 * file and line), before the repository is touched. Only regular files and directories: a
 * symbolic link is refused naming it (it could lead anywhere).
 */
export async function checkLayersDir(dir: string): Promise<CheckedLayer[]> {
  const names: string[] = []
  const walk = async (sub: string): Promise<void> => {
    let entries: Dirent[]
    try {
      entries = await readdir(join(dir, sub), {withFileTypes: true})
    } catch (error) {
      throw describeFsError(error, `--layers ${join(dir, sub)}`)
    }

    for (const entry of entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
      const path = sub === '' ? entry.name : `${sub}/${entry.name}`
      // A linked directory would be skipped while the includes it holds were found through it: published, they would name layers the repository lacks.
      if (entry.isSymbolicLink() && !entry.name.endsWith('.yaml')) throw new InputError(`--layers ${terminalText(dir)}: ${terminalText(path)} is a symbolic link; only regular files and directories are published (nothing published)`)
      if (entry.isDirectory()) await walk(path)
      else if (entry.name.endsWith('.yaml')) {
        const name = path.slice(0, -'.yaml'.length)
        if (!entry.isFile()) throw new InputError(`--layers ${terminalText(dir)}: ${terminalText(path)} is not a regular file; only regular files are published (nothing published)`)
        if (!isValidLayerName(name)) throw new InputError(`--layers ${terminalText(dir)}: ${terminalText(path)}: ${terminalText(JSON.stringify(name))} is not a layer name (lowercase, path-like: site/dc1)`)
        names.push(name)
      }
    }
  }

  await walk('')
  if (names.length === 0) throw new NotFoundError(`--layers ${dir}: no layers (NAME.yaml files, in subdirectories for path-like names: site/dc1.yaml)`)
  const source = directoryLayers(dir)
  const checked: CheckedLayer[] = []
  for (const name of names) {
    const read = (await source.read(name))!
    await resolveNamedLayers(parseLayer(read.text, read.file, name).includes, source)
    const bytes = Buffer.from(read.text, 'utf8')
    // checkIndexLayers refuses a larger size: listed, it would make every node refuse the whole index.
    if (bytes.length > MAX_LAYER_BYTES) throw new InputError(`${read.file}: layer ${name} is larger than ${MAX_LAYER_BYTES / 1024 / 1024} MiB, the most a node reads of a layer (nothing published)`)
    checked.push({name, file: read.file, bytes, sha256: createHash('sha256').update(bytes).digest('hex')})
  }

  return checked
}

/** What publish did with one layer. */
export interface PublishedLayerResult {
  layer: string
  path: string
  sha256: string
  status: 'added' | 'updated' | 'unchanged'
}

/**
 * Under the repository's lock: each layer written by its content (temp file, fsync,
 * rename) and its index entry set. A layer published before and not given again stays.
 */
export async function addLayers(repo: string, index: {layers?: Record<string, PublishedLayer>}, layers: CheckedLayer[], now: () => number): Promise<PublishedLayerResult[]> {
  const results: PublishedLayerResult[] = []
  for (const layer of layers) {
    const before = own(index.layers, layer.name)
    const path = layerPathFor(layer.name, layer.sha256)
    // Written again even when unchanged: a missing or damaged copy is repaired, and the bytes are the same.
    try {
      await mkdir(dirname(join(repo, path)), {recursive: true, mode: 0o755})
      await writeFileAtomic(join(repo, path), layer.bytes, 0o644)
    } catch (error) {
      throw describeFsError(error, join(repo, path))
    }

    if (before?.sha256 === layer.sha256) {
      results.push({layer: layer.name, path, sha256: layer.sha256, status: 'unchanged'})
      continue
    }

    ;(index.layers ??= {})[layer.name] = {layer: path, size: layer.bytes.length, sha256: layer.sha256, publishedAt: new Date(now()).toISOString()}
    results.push({layer: layer.name, path, sha256: layer.sha256, status: before ? 'updated' : 'added'})
  }

  return results
}

/**
 * A node input published with layers must name layers the repository has (after this
 * publish): 66 naming the node, the input and the layer otherwise, as the node would meet it.
 */
export function assertInputLayersPublished(inputs: Array<{node: string; file: string; bytes: Buffer}>, index: {layers?: Record<string, PublishedLayer>}): void {
  for (const input of inputs) {
    for (const ref of parseLayer(input.bytes.toString('utf8'), input.file, `node ${input.node}`, {extraKeys: ['app']}).includes) {
      if (!own(index.layers, ref.value)) {
        throw new NotFoundError(`${input.file}:${ref.origin.line ?? 1}: node ${input.node} names layer ${ref.value}, which the repository does not have`, ['publish it with the inputs: localpuppet publish --layers DIR --inputs DIR --repo DIR'])
      }
    }
  }
}

/**
 * `publish --computed`: each node input that names layers replaced by its computed input
 * (see computed-input.ts: its layers merged in, read from `layersDir`, else layers/ beside
 * the input), checked again as an input, so the repository holds for each node only its
 * own document and no layer. A flat input is published as it is.
 */
export async function computeNodeInputs<T extends {node: string; file: string; bytes: Buffer; sha256: string}>(inputs: T[], layersDir: string | undefined): Promise<T[]> {
  const [{parseNodeInput}, {computedNodeInput}, {layersDirFor}] = await Promise.all([import('../input/node-input.js'), import('./computed-input.js'), import('./run-layers.js')])
  const computed: T[] = []
  for (const input of inputs) {
    const parsed = parseNodeInput(input.bytes.toString('utf8'), input.file)
    if (!parsed.layers?.length) {
      computed.push(input)
      continue
    }

    const dir = layersDirFor({layersDir}, input.file)
    const {text} = await computedNodeInput(parsed, dir === undefined ? null : directoryLayers(dir))
    parseNodeInput(text, `${input.file} (computed)`)
    const bytes = Buffer.from(text, 'utf8')
    computed.push({...input, bytes, sha256: createHash('sha256').update(bytes).digest('hex')})
  }

  return computed
}
