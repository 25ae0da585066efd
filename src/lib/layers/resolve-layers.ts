import {join} from 'node:path'

import {InputError, LocalpuppetError, NotFoundError, describeFsError} from '../errors.js'
import type {NodeInput} from '../input/node-input.js'
import {decodeUtf8Strict, readBoundedFile} from '../util/bounded-read.js'
import {openedPathTrustProblem, refuseUnlessAllowed} from '../util/trusted-path.js'
import {MAX_YAML_BYTES, dumpYaml} from '../yaml.js'
import {type Layer, type Placed, at, parseLayer} from './layer-file.js'
import {type Merged, type MergedDocument, mergeLayers} from './merge.js'

/** At most this many named layers merge into one node's document: a bound on what a layers directory or a repository can make a node read. */
export const MAX_LAYERS = 256

/** The release's own layer: this file at the release's root, beside manifest.yaml. */
export const RELEASE_LAYER_FILE = 'layer.yaml'

/** Where named layers are read from: a directory (`site/dc1` is `DIR/site/dc1.yaml`), or layers fetched from a repository. */
export interface LayerSource {
  /** How messages name it: the directory, or the repository. */
  label: string
  /** The layer's text and how messages name its file; null when there is no such layer. */
  read(name: string): Promise<{text: string; file: string} | null>
}

/**
 * The layers directory as a source. With `trust` (apply and plan: root applies what a
 * layer says), each file and the directories leading to it must be owned by root or the
 * effective user and writable by nobody else, as the input file: 77 naming it before a
 * byte is read, unless `trust.allow` (--allow-untrusted), which records the problem in
 * `trust.untrusted`.
 */
export function directoryLayers(dir: string, trust?: {allow: boolean; untrusted: string[]}): LayerSource {
  return {
    label: dir,
    async read(name) {
      const file = join(dir, `${name}.yaml`)
      const error = (message: string) => new InputError(message)
      const inspect = trust
        ? (info: import('node:fs').Stats) => {
            const problem = openedPathTrustProblem(file, info, {what: `layer ${name}`, content: true})
            refuseUnlessAllowed(problem, {allow: trust.allow, content: true})
            if (problem) trust.untrusted.push(problem.message)
          }
        : undefined
      try {
        const bytes = await readBoundedFile(file, {maxBytes: MAX_YAML_BYTES, label: `layer ${file}`, error, expected: 'a YAML file', inspect, noFollow: true})
        return {text: decodeUtf8Strict(bytes, file, error), file}
      } catch (caught) {
        if (caught instanceof LocalpuppetError) throw caught
        if ((caught as NodeJS.ErrnoException).code === 'ENOENT' || (caught as NodeJS.ErrnoException).code === 'ENOTDIR') return null
        throw describeFsError(caught, `layer ${file}`)
      }
    },
  }
}

/** The release's own layer: `layer.yaml` at its root, or null when it ships none. Its tree was judged and verified with the release. */
export async function readReleaseLayer(releasePath: string, release: string): Promise<Layer | null> {
  const file = join(releasePath, RELEASE_LAYER_FILE)
  const error = (message: string) => new InputError(message)
  let bytes: Buffer
  try {
    bytes = await readBoundedFile(file, {maxBytes: MAX_YAML_BYTES, label: `release layer ${file}`, error, expected: 'a YAML file'})
  } catch (caught) {
    if (caught instanceof LocalpuppetError) throw caught
    if ((caught as NodeJS.ErrnoException).code === 'ENOENT') return null
    throw describeFsError(caught, `release layer ${file}`)
  }

  return parseLayer(decodeUtf8Strict(bytes, file, error), `${release}/${RELEASE_LAYER_FILE}`, `release ${release}`, {includes: false})
}

/**
 * The named layers in merge order: each layer's own `layers:` first (depth first), a layer
 * named twice merged once, where first reached. An unknown layer, or a layer that includes
 * itself through others, or layers adding up to more than MAX_YAML_BYTES, is refused (65)
 * naming the layer, file and line that named it.
 */
export async function resolveNamedLayers(names: ReadonlyArray<Placed<string>>, source: LayerSource | null): Promise<Layer[]> {
  const order: Layer[] = []
  const done = new Set<string>()
  // Each layer is bounded on its own; together they are bounded as one document is, or 256 of them would be hundreds of MiB to hold and write.
  let bytes = 0
  const visit = async (ref: Placed<string>, chain: string[]): Promise<void> => {
    if (done.has(ref.value)) return
    if (chain.includes(ref.value)) {
      throw new InputError(`${at(ref.origin)}: layer ${ref.origin.layer}: layers: ${ref.value} includes itself (${[...chain.slice(chain.indexOf(ref.value)), ref.value].join(' -> ')})`)
    }

    if (!source) {
      throw new NotFoundError(`${at(ref.origin)}: layer ${ref.origin.layer}: layers: ${ref.value}: no layers directory to find it in (give --layers DIR or set layers_dir)`)
    }

    if (order.length + chain.length >= MAX_LAYERS) throw new InputError(`${at(ref.origin)}: layer ${ref.origin.layer}: layers: ${ref.value}: more than ${MAX_LAYERS} layers for one node`)
    const read = await source.read(ref.value)
    if (!read) throw new InputError(`${at(ref.origin)}: layer ${ref.origin.layer}: layers: unknown layer ${ref.value} (no ${ref.value}.yaml in ${source.label})`)
    bytes += Buffer.byteLength(read.text)
    if (bytes > MAX_YAML_BYTES) throw new InputError(`${at(ref.origin)}: layer ${ref.origin.layer}: layers: ${ref.value}: the layers of one node add up to more than ${MAX_YAML_BYTES / 1024 / 1024} MiB`)
    const layer = parseLayer(read.text, read.file, ref.value)
    for (const included of layer.includes) await visit(included, [...chain, ref.value])
    done.add(ref.value)
    order.push(layer)
  }

  for (const name of names) await visit(name, [])
  return order
}

/** The node's own input as its last layer (`node`), its lines kept for origins. */
export function nodeLayer(input: Pick<NodeInput, 'text' | 'source' | 'raw'>): Layer {
  // An input built in memory (no text): its values still merge, with no line to name.
  const text = input.text ?? JSON.stringify(input.raw)
  return parseLayer(text, input.source, 'node', {extraKeys: ['app']})
}

/** Whether a node's input takes part in layering: it names layers or removes something, or its release ships a layer. */
export function isLayered(input: Pick<NodeInput, 'layers' | 'remove'>, releaseLayer: Layer | null): boolean {
  return releaseLayer !== null || (input.layers?.length ?? 0) > 0 || (input.remove?.length ?? 0) > 0
}

/**
 * THE computed document of a node: the release's own layer (when `releasePath` ships
 * one), the layers its input names in order (from `source`), then its own input, merged
 * (see merge.ts), with every value's origin and every layer's digest. Null for a flat
 * input whose release ships no layer: its document is the input itself, unchanged.
 * This is the one function that says what a node receives (publish stores it; `enc`
 * prints it; a run applies it).
 */
export async function computeNodeDocument(input: Pick<NodeInput, 'text' | 'source' | 'raw' | 'layers' | 'remove'>, release: {path: string; release: string}, source: LayerSource | null): Promise<Merged | null> {
  const releaseLayer = await readReleaseLayer(release.path, release.release)
  if (!isLayered(input, releaseLayer)) return null
  const own = nodeLayer(input)
  const named = await resolveNamedLayers(own.includes, source)
  return mergeLayers([...(releaseLayer ? [releaseLayer] : []), ...named, own])
}

/**
 * The document a node receives, layered or flat, without what localpuppet adds per run
 * (`localpuppet_release`, `localpuppet_run_id`): for a flat input whose release ships no
 * layer, its own classes, parameters and environment. The one function to call for what a
 * node is to receive (to store, encrypt or print it); `renderNodeDocument` gives its bytes.
 */
export async function nodeDocument(input: Pick<NodeInput, 'text' | 'source' | 'raw' | 'layers' | 'remove' | 'classes' | 'parameters' | 'environment'>, release: {path: string; release: string}, source: LayerSource | null): Promise<{document: MergedDocument; layers: Merged | null}> {
  const merged = await computeNodeDocument(input, release, source)
  if (merged) return {document: merged.document, layers: merged}
  const {classes, parameters, environment} = input
  return {document: {...(classes ? {classes: classes as MergedDocument['classes']} : {}), ...(parameters ? {parameters} : {}), ...(environment ? {environment} : {})}, layers: null}
}

/** A node document's bytes: YAML as Puppet's ENC loader reads it back (see yaml.ts dumpYaml). */
export function renderNodeDocument(document: MergedDocument): string {
  return dumpYaml(document)
}
