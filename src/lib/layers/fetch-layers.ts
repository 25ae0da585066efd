import {mkdir} from 'node:fs/promises'
import {dirname, join} from 'node:path'

import {describeFsError} from '../errors.js'
import type {NodeInput} from '../input/node-input.js'
import {type PreparedFile, prepareFileAtomic} from '../util/atomic-write.js'
import {redactUrl} from '../util/terminal-text.js'
import {findTrustProblem, refuseUnlessAllowed} from '../util/trusted-path.js'
import {type LayerSource, nodeLayer, resolveNamedLayers} from './resolve-layers.js'

/** A layer fetched for a node: its name and the bytes the signed index vouches for. */
export interface FetchedLayer {
  name: string
  bytes: Buffer
  text: string
  sha256: string
  location: string
}

/** Where a node whose input comes from the repository keeps the layers it fetched: `layers/` beside its input file. */
export function keptLayersDir(inputPath: string): string {
  return join(dirname(inputPath), 'layers')
}

/**
 * The layers a fetched node input names, and those they include, each read from the same
 * signed index and verified by `read` (unknown layer, cycle: 65 naming the file and line
 * that named it). Returns them, and a source that serves exactly those bytes to the run.
 */
export async function fetchNodeLayers(input: NodeInput, read: (name: string) => Promise<Omit<FetchedLayer, 'name'> | null>, label: string): Promise<{layers: FetchedLayer[]; source: LayerSource}> {
  const fetched = new Map<string, FetchedLayer>()
  const source: LayerSource = {
    // The configured source: its credentials stay out of every message (and so of the run record).
    label: redactUrl(label),
    async read(name) {
      const got = fetched.get(name) ?? (await read(name).then((layer) => layer && {name, ...layer}))
      if (!got) return null
      fetched.set(name, got)
      return {text: got.text, file: got.location}
    },
  }
  const order = await resolveNamedLayers(nodeLayer(input).includes, source)
  return {layers: order.map((layer) => fetched.get(layer.name)!), source}
}

/**
 * Keeps fetched layers where a later run finds them without the repository (each written
 * atomically, only when changed is not worth a read: they are small). Each one's path must
 * be one nobody else can change, all judged before a byte is written (77 naming it, unless
 * `allowUntrusted`, which returns the problems): root writes there, and an offline run
 * merges what it finds there. All or none: see prepareKeptLayers.
 */
export async function keepLayers(dir: string, layers: FetchedLayer[], allowUntrusted: boolean): Promise<string[]> {
  const prepared = await prepareKeptLayers(dir, layers, allowUntrusted)
  commitAll(prepared.files)
  return prepared.untrusted
}

/**
 * keepLayers' first half: every layer written and flushed beside its kept copy, none renamed
 * into place yet. A full disk midway (74 naming the layer) leaves the copies kept before as
 * they were and no temporary file: an offline run never merges some layers of this fetch
 * with others of the last. The caller commits them (with the input they go with) back to back.
 */
export async function prepareKeptLayers(dir: string, layers: FetchedLayer[], allowUntrusted: boolean): Promise<{untrusted: string[]; files: PreparedFile[]}> {
  const untrusted: string[] = []
  for (const layer of layers) {
    const problem = findTrustProblem(join(dir, `${layer.name}.yaml`), {what: `kept layer ${layer.name}`, content: true})
    refuseUnlessAllowed(problem, {allow: allowUntrusted, content: true})
    if (problem && !untrusted.includes(problem.message)) untrusted.push(problem.message)
  }

  const files: PreparedFile[] = []
  for (const layer of layers) {
    const target = join(dir, `${layer.name}.yaml`)
    try {
      await mkdir(dirname(target), {recursive: true, mode: 0o755})
      files.push(await prepareFileAtomic(target, layer.bytes, 0o644))
    } catch (error) {
      await abortAll(files)
      throw describeFsError(error, `layer ${target}`)
    }
  }

  return {untrusted, files}
}

/** Renames prepared files into place back to back (see prepareFileAtomic); one that fails takes the rest's temporary files away. */
export function commitAll(files: PreparedFile[]): void {
  for (const [i, file] of files.entries()) {
    try {
      file.commit()
    } catch (error) {
      void abortAll(files.slice(i))
      throw error
    }
  }
}

/** Removes the temporary files of prepared files not committed. */
export async function abortAll(files: PreparedFile[]): Promise<void> {
  await Promise.all(files.map((file) => file.abort()))
}
