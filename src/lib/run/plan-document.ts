import type {RunPlan} from './run-plan.js'
import type {MergedDocument} from '../layers/merge.js'
import {renderNodeDocument} from '../layers/resolve-layers.js'
import type {PlanLayers} from '../layers/run-layers.js'

/** What `enc` prints: the node's computed document (as YAML too), its release, and, for a layered input, its layers and origins. */
export interface NodeEnc {
  release: string
  document: MergedDocument
  yaml: string
  layers: PlanLayers | null
}

/** A plan's document as a node receives it, without what each run adds (localpuppet_release, localpuppet_run_id). */
export function planDocument(plan: RunPlan): NodeEnc {
  const {localpuppet_release: _release, localpuppet_run_id: _runId, ...parameters} = plan.enc.parameters
  const {classes, environment} = plan.enc
  const document: MergedDocument = {...(classes ? {classes: classes as MergedDocument['classes']} : {}), ...(Object.keys(parameters).length > 0 ? {parameters} : {}), ...(environment ? {environment} : {})}
  return {release: plan.release, document, yaml: renderNodeDocument(document), layers: plan.layers ?? null}
}
