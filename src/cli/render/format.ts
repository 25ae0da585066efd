import chalk from 'chalk'

import type {RunRecord, RunState} from '../../lib/state/run-record.js'

export function colorState(state: RunState | string): string {
  if (state === 'succeeded') return chalk.green(state)
  if (state === 'skipped') return chalk.green.dim(state)
  if (state === 'running') return chalk.cyan(state)
  if (state === 'interrupted') return chalk.yellow(state)
  return chalk.red(state)
}

export function formatDuration(ms: number | null): string {
  if (ms === null) return '-'
  if (ms < 1000) return `${ms}ms`
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)}s`
  const minutes = Math.floor(ms / 60_000)
  return `${minutes}m${Math.round((ms % 60_000) / 1000)}s`
}

export function formatResources(record: Pick<RunRecord, 'resources' | 'state'>): string {
  const r = record.resources
  if (!r) {
    if (record.state === 'running') return '- (still running)'
    return ['skipped', 'refused', 'busy'].includes(record.state) ? '- (puppet did not run)' : 'no summary (puppet wrote none)'
  }

  return `${r.changed} changed, ${r.failed} failed, ${r.outOfSync} out of sync, ${r.total} total`
}

/** Aligned `label  value` rows; a value with several lines is indented under its label. */
export function table(rows: Array<[string, string | string[]]>): string {
  const width = Math.max(...rows.map(([label]) => label.length))
  return rows
    .flatMap(([label, value]) => {
      const lines = Array.isArray(value) ? value : [value]
      return lines.map((line, i) => `${(i === 0 ? label : '').padEnd(width)}  ${line}`)
    })
    .join('\n')
}

/** Which Puppet: `puppet 8.10.0  /usr/bin/puppet`; an executable no package or gem owns is `unknown`. */
export function formatPuppet(puppet: {implementation: string | null; version: string | null; path: string | null}): string {
  if (puppet.path === null) return 'not found'
  const which = puppet.implementation === null ? 'unknown' : `${puppet.implementation}${puppet.version === null ? '' : ` ${puppet.version}`}`
  return `${which}  ${puppet.path}`
}

/** A language mode: `strict=error strict_variables=true  (Puppet 8's defaults)` or pinned by a manifest. */
export function formatLanguageMode(mode: {strict: string; strictVariables: boolean; pinned: string | null}): string {
  return `strict=${mode.strict} strict_variables=${mode.strictVariables}  (${mode.pinned === null ? "the release pins neither: Puppet 8's defaults" : `pinned by ${mode.pinned}`})`
}
