import {readFile, readdir} from 'node:fs/promises'
import {join} from 'node:path'

import semver from 'semver'

import type {LanguageMode} from '../release/language-mode.js'

/** Which Puppet validate runs with, as identifyPuppet tells it. */
export interface RunningPuppet {
  implementation: 'puppet' | 'openvox' | null
  version: string | null
  path: string
}

/** Something about one module's metadata.json: `problem` when Puppet will not load the module or cannot run it, else `warning`. */
export interface ModuleFinding {
  severity: 'problem' | 'warning'
  /** The metadata.json, and the line at fault in it. */
  file: string
  line: number | null
  message: string
}

/** One module's metadata.json as read: its text (null: unreadable) and what JSON made of it. */
export interface ModuleMetadata {
  module: string
  text: string | null
  /** The parsed document, or undefined when the text is not JSON. */
  data: unknown
  /** Why the text is not JSON (with its line), or null. */
  error: {message: string; line: number | null} | null
}

/** Every module of a release root that has a metadata.json, read once (module requirements and metadata share it). */
export async function readModuleMetadata(releasePath: string): Promise<ModuleMetadata[]> {
  const found: ModuleMetadata[] = []
  const modules = await readdir(releasePath, {withFileTypes: true}).catch(() => [])
  for (const module of modules.filter((entry) => entry.isDirectory()).map((entry) => entry.name).sort()) {
    const text = await readFile(join(releasePath, module, 'metadata.json'), 'utf8').catch((error: NodeJS.ErrnoException) => (error.code === 'ENOENT' || error.code === 'ENOTDIR' ? undefined : null))
    if (text === undefined) continue
    if (text === null) {
      found.push({module, text: null, data: undefined, error: {message: 'cannot be read', line: null}})
      continue
    }

    try {
      found.push({module, text, data: JSON.parse(text), error: null})
    } catch (error) {
      // V8's words without the excerpt of the text it may quote (`Unexpected token '}', ..."ersion": ...`), on one line.
      const message = (error as Error).message
      const at = /at position (\d+)/.exec(message)
      const reason = message.split(/, (?:\.\.\.)?"|\n| in JSON at position/)[0]
      found.push({module, text, data: undefined, error: {message: reason, line: at ? text.slice(0, Number(at[1])).split('\n').length : null}})
    }
  }

  return found
}

/** The keys Puppet::Module#load_metadata refuses a module without (7.23 and 8.10 alike). */
const REQUIRED_KEYS = ['source', 'author', 'version', 'license', 'dependencies']

/**
 * Whether Puppet will load each module, as its metadata.json decides (Puppet::Module,
 * tried on 7.23 and 8.10): a metadata.json that lacks one of `source`, `author`,
 * `version`, `license`, `dependencies` (or whose dependencies are not a list), or is not
 * a JSON object, makes Puppet refuse the module whatever `strict` says (its classes are
 * then not found): a problem. One that is not JSON at all is refused only under
 * `strict: error` (a problem then); under `warning` or `off` Puppet loads the module
 * without its metadata (a warning). An empty file is no metadata to Puppet 8 and not
 * JSON to Puppet 7. `{}` and `[]` are no metadata to both.
 */
export function metadataFindings(metadata: ModuleMetadata[], label: string, strict: LanguageMode['strict'], puppetVersion: string | null): ModuleFinding[] {
  const findings: ModuleFinding[] = []
  const major = puppetVersion === null ? null : semver.coerce(puppetVersion)?.major ?? null
  for (const {module, text, data, error} of metadata) {
    const shown = `${label}/${module}/metadata.json`
    const at = (line: number | null) => `${shown}${line === null ? '' : `:${line}`}`
    if (text === '' && (major === null || major >= 8)) continue
    if (error !== null || text === '') {
      const why = text === '' ? 'is empty, which Puppet 7 reads as invalid JSON' : `is not valid JSON (${error?.message})`
      const line = text === '' ? null : (error?.line ?? null)
      findings.push(
        strict === 'error'
          ? {severity: 'problem', file: shown, line, message: `${at(line)}: module ${module}: metadata.json ${why}; under strict: error Puppet refuses the module (Could not find class ${module})`}
          : {severity: 'warning', file: shown, line, message: `${at(line)}: module ${module}: metadata.json ${why}; under strict: ${strict} Puppet loads the module without it, under strict: error it refuses the module`},
      )
      continue
    }

    if (Array.isArray(data) && data.length === 0) continue
    if (data === null || typeof data !== 'object' || Array.isArray(data)) {
      findings.push({severity: 'problem', file: shown, line: 1, message: `${at(1)}: module ${module}: metadata.json is not a JSON object; Puppet cannot load the module`})
      continue
    }

    const document = data as Record<string, unknown>
    if (Object.keys(document).length === 0) continue
    const missing = REQUIRED_KEYS.filter((key) => document[key] === undefined || document[key] === null)
    if (missing.length > 0) {
      const keys = missing.map((key) => `"${key}"`).join(', ')
      findings.push({severity: 'problem', file: shown, line: 1, message: `${at(1)}: module ${module}: metadata.json lacks ${keys}; Puppet refuses the module whatever strict says (No ${missing[0]} module metadata provided for ${module})`})
    } else if (!Array.isArray(document.dependencies)) {
      const line = lineOf(text!, '"dependencies"')
      findings.push({severity: 'problem', file: shown, line, message: `${at(line)}: module ${module}: metadata.json "dependencies" is not a list; Puppet refuses the module whatever strict says`})
    }
  }

  return findings
}

/**
 * Checks every module's `metadata.json` `requirements` in a release root against the
 * Puppet validate runs with (whose implementation and version must be known). The entries
 * named after the running implementation decide; OpenVox, which keeps Puppet's version
 * numbers, is held to `puppet` ranges when a module names no `openvox` one; Puppet is not
 * held to `openvox`-only ranges. A version below the range (the module needs a newer
 * Puppet, `>= 9.0.0`) or in a gap of it is a problem; one above it is a warning, because
 * upper bounds go stale: Debian 12 ships modules that say `< 7.0.0` with, and working on,
 * its Puppet 7.23. Metadata that is not JSON is metadataFindings' to report.
 */
export function requirementFindings(metadata: ModuleMetadata[], label: string, puppet: RunningPuppet & {implementation: 'puppet' | 'openvox'; version: string}): ModuleFinding[] {
  if (semver.valid(puppet.version) === null) return []
  const findings: ModuleFinding[] = []
  for (const {module, text, data} of metadata) {
    const requirements = (data as {requirements?: unknown} | null | undefined)?.requirements
    if (!Array.isArray(requirements) || text === null) continue
    const shown = `${label}/${module}/metadata.json`
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
