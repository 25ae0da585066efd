import chalk from 'chalk'

import {displayPath} from '../../lib/util/shell-quote.js'
import {terminalText} from '../../lib/util/terminal-text.js'
import type {RunPlan} from '../../lib/run/run-plan.js'
import {formatLanguageMode, formatPuppet, table} from './format.js'
import {renderOrigins} from './origins-text.js'

/** The human rendering of a plan: what will run, exactly. */
export function renderPlan(plan: RunPlan): string {
  // Names, paths, facts and the input's values, each on its line (escaped before it is coloured).
  const t = terminalText
  const modulepath = plan.releases.map((entry) => {
    const from = entry.requiredBy === null ? '' : chalk.dim(`  <- ${t(entry.requiredBy)}`)
    const mutable = entry.mutable && entry.requiredBy !== null ? chalk.yellow(` (mutable: ${entry.kind === 'tag' ? 'range' : entry.kind})`) : ''
    return `${t(entry.path)}${mutable}${from}`
  })
  const rows: Array<[string, string | string[]]> = [
    ['release', `${chalk.bold(t(plan.release))}${plan.ref === plan.release ? '' : chalk.dim(`  (from ${t(plan.ref)})`)}`],
    ['module dir', t(plan.moduleDir)],
    ['modulepath', modulepath],
    ['manifest', `${t(plan.manifest.path)}${plan.manifest.source === 'empty' ? chalk.dim('  (empty: no default manifest found)') : ''}`],
    ['environment', t(plan.environment)],
    ['puppet', `${t(formatPuppet(plan.puppet))}${plan.puppet.found === 'fallback' ? chalk.dim('  (not on PATH)') : ''}`],
    ['language', t(formatLanguageMode(plan.languageMode))],
  ]
  if (Object.keys(plan.facts).length > 0) rows.push(['facts', Object.entries(plan.facts).map(([k, v]) => t(`${k}=${v}`))])
  if (plan.noop) rows.push(['noop', 'yes'])
  if (plan.timeoutSeconds !== null) rows.push(['timeout', `${plan.timeoutSeconds}s`])
  // Words as sh reads them; a word with a control character as a JSON string (displayPath), which shows every one.
  const env = Object.entries(plan.env).map(([k, v]) => `${k}=${displayPath(v)} `).join('')
  const lines = [
    table(rows),
    '',
    chalk.bold('ENC document') + chalk.dim(` (printed by ${t(plan.files.encScript)})`),
    ...plan.encYaml.trimEnd().split('\n').map((line) => `  ${t(line)}`),
    ...(plan.secrets
      ? ['', chalk.bold('secrets') + chalk.dim(' (to Puppet as Sensitive, through Hiera; kept encrypted to this node)'), ...Object.entries(plan.secrets).map(([key, secret]) => `  ${t(key)}: ${secret}`)]
      : []),
    '',
    ...(plan.layers ? [...renderOrigins(plan.layers), ''] : []),
    chalk.bold('command'),
    `  ${t(`${env}${plan.command.map((word) => displayPath(word)).join(' ')}`, Number.POSITIVE_INFINITY)}`,
  ]
  return lines.join('\n')
}
