/** One sample: labels and a value. */
export interface Sample {
  labels?: Record<string, string>
  value: number
}

/** A metric family in Prometheus' text exposition format (version 0.0.4). */
export interface MetricFamily {
  name: string
  help: string
  type: 'gauge' | 'counter'
  samples: Sample[]
}

/**
 * Renders families as Prometheus' text format: HELP and TYPE lines, then one line per
 * sample, label values escaped (backslash, double quote, newline) as the format says.
 */
export function renderPrometheus(families: MetricFamily[]): string {
  const lines: string[] = []
  for (const family of families) {
    lines.push(`# HELP ${family.name} ${family.help.replaceAll('\\', '\\\\').replaceAll('\n', '\\n')}`, `# TYPE ${family.name} ${family.type}`)
    for (const sample of family.samples) {
      const labels = Object.entries(sample.labels ?? {})
      const rendered = labels.length === 0 ? '' : `{${labels.map(([name, value]) => `${name}="${escapeLabel(value)}"`).join(',')}}`
      lines.push(`${family.name}${rendered} ${formatValue(sample.value)}`)
    }
  }

  return lines.join('\n') + '\n'
}

function escapeLabel(value: string): string {
  return value.replaceAll('\\', '\\\\').replaceAll('"', '\\"').replaceAll('\n', '\\n')
}

function formatValue(value: number): string {
  if (Number.isNaN(value)) return 'NaN'
  if (value === Number.POSITIVE_INFINITY) return '+Inf'
  if (value === Number.NEGATIVE_INFINITY) return '-Inf'
  return String(value)
}
