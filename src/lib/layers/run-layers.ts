import {dirname, join} from 'node:path'

import type {NodeInput} from '../input/node-input.js'
import type {LayerDigest, Origins} from './merge.js'
import {type LayerSource, computeNodeDocument, directoryLayers} from './resolve-layers.js'

/** Where the layers an input names are read from: --layers (the layers_dir setting), else layers/ beside the input file (none for standard input). */
export function layersDirFor(options: {layersDir?: string}, inputPath: string): string | undefined {
  return options.layersDir ?? (inputPath === '-' ? undefined : join(dirname(inputPath), 'layers'))
}

/** What a plan (and the run record) says of a layered input: every layer merged, with its digest, and where each value came from. */
export interface PlanLayers {
  layers: LayerDigest[]
  origins: Origins
}

/**
 * A node input as the run applies it once its layers are merged: the input with the
 * computed classes, parameters and environment in place of its own, what the plan shows
 * of its layers, and what --allow-untrusted let through reading them. Null for a flat
 * input whose release ships no layer (it runs exactly as before). `layers` is the
 * directory named layers are read from (judged as the input file is: root applies what
 * they say), or a source of its own (layers fetched from the repository).
 */
export async function layeredInput(input: NodeInput, release: {path: string; release: string}, layers: string | LayerSource | undefined, allowUntrusted: boolean): Promise<{input: NodeInput; layers: PlanLayers; untrusted: string[]} | null> {
  const untrusted: string[] = []
  const source = typeof layers === 'string' ? directoryLayers(layers, {allow: allowUntrusted, untrusted}) : (layers ?? null)
  const merged = await computeNodeDocument(input, release, source)
  if (!merged) return null
  const {classes: _classes, parameters: _parameters, environment: _environment, ...rest} = input
  const {classes, parameters, environment} = merged.document
  const computed: NodeInput = {...rest, ...(classes ? {classes} : {}), ...(parameters ? {parameters} : {}), ...(environment ? {environment} : {})}
  return {input: computed, layers: {layers: merged.layers, origins: merged.origins}, untrusted}
}
