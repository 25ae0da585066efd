import {readFile, readdir} from 'node:fs/promises'
import {join} from 'node:path'

import semver from 'semver'

/** Which Puppet validate runs with, as identifyPuppet tells it. */
export interface RunningPuppet {
  implementation: 'puppet' | 'openvox' | null
  version: string | null
  path: string
}

/** One module requirement the running Puppet does not meet: `problem` when the module needs a newer Puppet (or the range is malformed), else `warning` (this Puppet is newer than the module says it was tested with). */
export interface RequirementFinding {
  severity: 'problem' | 'warning'
  /** The metadata.json, and the line of the range in it. */
  file: string
  line: number | null
  message: string
}

/**
 * Checks every module's `metadata.json` `requirements` in a release root against the
 * Puppet validate runs with. The entries named after the running implementation decide;
 * OpenVox, which keeps Puppet's version numbers, is held to `puppet` ranges when a module
 * names no `openvox` one; Puppet is not held to `openvox`-only ranges. A version below the
 * range (the module needs a newer Puppet, `>= 9.0.0`) or in a gap of it is a problem; one
 * above it is a warning, because upper bounds go stale: Debian 12 ships modules that say
 * `< 7.0.0` with, and working on, its Puppet 7.23.
 */
export async function checkModuleRequirements(releasePath: string, label: string, puppet: RunningPuppet): Promise<RequirementFinding[]> {
  if (puppet.implementation === null || puppet.version === null || semver.valid(puppet.version) === null) return []
  const findings: RequirementFinding[] = []
  const modules = await readdir(releasePath, {withFileTypes: true}).catch(() => [])
  for (const module of modules.filter((entry) => entry.isDirectory()).map((entry) => entry.name).sort()) {
    const file = join(releasePath, module, 'metadata.json')
    const shown = `${label}/${module}/metadata.json`
    let text: string
    let requirements: unknown
    try {
      text = await readFile(file, 'utf8')
      requirements = (JSON.parse(text) as {requirements?: unknown}).requirements
    } catch {
      // No metadata, or not JSON: Puppet does not need it to load the module; not this check's business.
      continue
    }

    if (!Array.isArray(requirements)) continue
    const entries = requirements.filter((entry): entry is {name: string; version_requirement?: unknown} => typeof entry?.name === 'string' && ['puppet', 'openvox'].includes(entry.name))
    const own = entries.filter((entry) => entry.name === puppet.implementation)
    const applying = own.length > 0 ? own : puppet.implementation === 'openvox' ? entries.filter((entry) => entry.name === 'puppet') : []
    for (const entry of applying) {
      const range = entry.version_requirement
      if (range === undefined) continue
      const line = lineOf(text, JSON.stringify(range))
      const where = `${shown}${line === null ? '' : `:${line}`}`
      if (typeof range !== 'string' || semver.validRange(range) === null) {
        findings.push({severity: 'problem', file: shown, line, message: `${where}: module ${module}: requirements: ${entry.name} version_requirement ${JSON.stringify(range)} is not a version range (such as ">= 7.0.0 < 9.0.0")`})
        continue
      }

      if (semver.satisfies(puppet.version, range)) continue
      const running = `${puppet.implementation} ${puppet.version} (${puppet.path})`
      const above = semver.gtr(puppet.version, range)
      findings.push({
        severity: above ? 'warning' : 'problem',
        file: shown,
        line,
        message: above
          ? `${where}: module ${module} requires ${entry.name} ${range}; ${running} is newer than that (an upper bound the module may not have updated)`
          : `${where}: module ${module} requires ${entry.name} ${range}; this is ${running}`,
      })
    }
  }

  return findings
}

function lineOf(text: string, needle: string): number | null {
  const at = text.indexOf(needle)
  return at === -1 ? null : text.slice(0, at).split('\n').length
}
