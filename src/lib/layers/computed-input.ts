import type {Layer} from './layer-file.js'
import {type LayerDigest, mergeLayers} from './merge.js'
import {type LayerSource, nodeLayer, resolveNamedLayers} from './resolve-layers.js'
import type {NodeInput} from '../input/node-input.js'
import {dumpYaml} from '../yaml.js'

/** A node's input with its named layers merged in: what `publish --computed` stores for the node, and nothing of any other node's. */
export interface ComputedNodeInput {
  /** The document the node receives: `app`, what the layers and it remove, and the merged classes, parameters and environment. */
  text: string
  /** The layers merged into it, in order, with their digests (the node's own input last). */
  layers: LayerDigest[]
}

/**
 * THE document a node receives from the repository when its input is computed at publish
 * time: its named layers (from `source`) and its own input merged, with `layers:` gone, so
 * the node needs no layer and sees none of another node's. Its release's own layer is not
 * in it (the release, which the node installs anyway, brings it, and a channel promotion
 * changes it with no republish); every `remove:` of those layers is kept, so that merged
 * again over the release's layer at the run it gives exactly what the full merge gives
 * (removals only delete and values only overwrite, so merging the named layers first is
 * the same as merging them after the release's). Plain YAML text: store it, or encrypt it.
 */
export async function computedNodeInput(input: Pick<NodeInput, 'text' | 'source' | 'raw' | 'app'>, source: LayerSource | null): Promise<ComputedNodeInput> {
  const own = nodeLayer(input)
  const layers: Layer[] = [...(await resolveNamedLayers(own.includes, source)), own]
  const merged = mergeLayers(layers)
  const remove = [...new Set(layers.flatMap((layer) => layer.removals.map((removal) => removal.path)))]
  const document = {app: input.app.text, ...(remove.length > 0 ? {remove} : {}), ...merged.document}
  return {text: dumpYaml(document), layers: merged.layers}
}
