import chalk from 'chalk'

import {shellQuote} from '../../lib/util/shell-quote.js'
import type {RunPlan} from '../../lib/run/run-plan.js'
import {formatLanguageMode, formatPuppet, table} from './format.js'

/** The human rendering of a plan: what will run, exactly. */
export function renderPlan(plan: RunPlan): string {
  const modulepath = plan.releases.map((entry) => {
    const from = entry.requiredBy === null ? '' : chalk.dim(`  <- ${entry.requiredBy}`)
    const mutable = entry.mutable && entry.requiredBy !== null ? chalk.yellow(` (mutable: ${entry.kind === 'tag' ? 'range' : entry.kind})`) : ''
    return `${entry.path}${mutable}${from}`
  })
  const rows: Array<[string, string | string[]]> = [
    ['release', `${chalk.bold(plan.release)}${plan.ref === plan.release ? '' : chalk.dim(`  (from ${plan.ref})`)}`],
    ['module dir', plan.moduleDir],
    ['modulepath', modulepath],
    ['manifest', `${plan.manifest.path}${plan.manifest.source === 'empty' ? chalk.dim('  (empty: no default manifest found)') : ''}`],
    ['environment', plan.environment],
    ['puppet', `${formatPuppet(plan.puppet)}${plan.puppet.found === 'fallback' ? chalk.dim('  (not on PATH)') : ''}`],
    ['language', formatLanguageMode(plan.languageMode)],
  ]
  if (Object.keys(plan.facts).length > 0) rows.push(['facts', Object.entries(plan.facts).map(([k, v]) => `${k}=${v}`)])
  if (plan.noop) rows.push(['noop', 'yes'])
  if (plan.timeoutSeconds !== null) rows.push(['timeout', `${plan.timeoutSeconds}s`])
  const env = Object.entries(plan.env).map(([k, v]) => `${k}=${shellQuote(v)} `).join('')
  const lines = [
    table(rows),
    '',
    chalk.bold('ENC document') + chalk.dim(` (printed by ${plan.files.encScript})`),
    ...plan.encYaml.trimEnd().split('\n').map((line) => `  ${line}`),
    '',
    chalk.bold('command'),
    `  ${env}${plan.command.map((word) => shellQuote(word)).join(' ')}`,
  ]
  return lines.join('\n')
}
