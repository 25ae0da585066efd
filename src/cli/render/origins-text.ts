import chalk from 'chalk'

import type {Origin} from '../../lib/layers/layer-file.js'
import type {PlanLayers} from '../../lib/layers/run-layers.js'
import {terminalText} from '../../lib/util/terminal-text.js'

/**
 * Where every class and value of a layered input's document came from, as `config` shows
 * settings' origins: one line per class, class parameter, parameter and the environment,
 * naming the layer, file and line; then the layers merged, in order, with their digests.
 */
export function renderOrigins(layers: PlanLayers): string[] {
  const t = terminalText
  const where = (origin: Origin) => `${t(origin.layer)}  ${chalk.dim(t(origin.line === null ? origin.file : `${origin.file}:${origin.line}`))}`
  const rows: Array<[string, string]> = []
  for (const [name, cls] of Object.entries(layers.origins.classes)) {
    rows.push([`class ${name}`, where(cls.origin)])
    for (const [param, origin] of Object.entries(cls.parameters)) rows.push([`  ${param}`, where(origin)])
  }

  for (const [name, origin] of Object.entries(layers.origins.parameters)) rows.push([`parameter ${name}`, where(origin)])
  if (layers.origins.environment) rows.push(['environment', where(layers.origins.environment)])
  const width = Math.max(0, ...rows.map(([label]) => label.length))
  return [
    chalk.bold('origins') + chalk.dim(' (layer, file:line)'),
    ...rows.map(([label, value]) => `  ${label.padEnd(width)}  ${value}`),
    '',
    chalk.bold('layers') + chalk.dim(' (merged in this order; a later one wins)'),
    ...layers.layers.map((layer) => `  ${t(layer.name)}  ${chalk.dim(`${t(layer.file)}  ${layer.digest}`)}`),
  ]
}
