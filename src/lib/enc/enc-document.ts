import type {NodeInput} from '../input/node-input.js'
import {dumpYaml} from '../yaml.js'

/** What Puppet's exec node terminus accepts: classes, parameters and environment only. */
export interface EncDocument {
  classes?: NodeInput['classes']
  parameters: Record<string, unknown>
  environment?: string
}

/**
 * The ENC document for a run: the input without `app`, plus `localpuppet_release` and
 * `localpuppet_run_id` so manifests and reports know exactly what code ran.
 */
export function buildEncDocument(input: NodeInput, provenance: {release: string; runId: string}): EncDocument {
  const parameters = {...input.parameters, localpuppet_release: provenance.release, localpuppet_run_id: provenance.runId}
  return {
    ...(input.classes === undefined ? {} : {classes: input.classes}),
    parameters,
    ...(input.environment === undefined ? {} : {environment: input.environment}),
  }
}

/** The exact bytes the ENC script prints. */
export function renderEncYaml(doc: EncDocument): string {
  return dumpYaml(doc)
}
