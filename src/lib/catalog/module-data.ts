import {readFileSync, readdirSync, statSync} from 'node:fs'
import {join, relative} from 'node:path'

import yaml from 'js-yaml'

import {isMapping} from '../util/json.js'
import {lineOfKey} from '../yaml.js'

/** A value a module's own Hiera data gives a key, on every node. */
export interface DataValue {
  value: unknown
  /** The data file, relative to the module directory's parent (`ntp/data/common.yaml`). */
  file: string
  line: number | null
  /** The hierarchy level's name. */
  level: string
  /** The value contains `%{...}`: its type and content are only known on a node. */
  interpolated: boolean
}

/**
 * What a module's data says about one key, without a node:
 * - `value`: a level that does not depend on facts gives it (Puppet uses it unless an
 *   earlier, fact-dependent level in `mayOverride` has it for that node);
 * - `maybe`: only levels that depend on the node (facts, trusted data) or that cannot be
 *   read statically (a custom backend) might give it;
 * - `none`: certainly not in the module's data.
 */
export type DataLookup =
  | {kind: 'value'; value: DataValue; mayOverride: string[]}
  | {kind: 'maybe'; levels: string[]}
  | {kind: 'none'}

export interface ModuleData {
  module: string
  lookup(key: string): DataLookup
}

interface Level {
  name: string
  /** Data files read from levels that do not depend on the node, in hierarchy order. */
  known: Array<{file: string; data: Record<string, unknown>; text: string; lines?: Map<string, number | null>}>
  /** Keys that files of a node-dependent level may hold; 'any' when it cannot be known. */
  maybe: Set<string> | 'any'
}

const NO_DATA: ModuleData = {module: '', lookup: () => ({kind: 'none'})}

/**
 * Reads a module's own Hiera data (its hiera.yaml, version 5, and the data files of each
 * level) the way Puppet's module data provider would, as far as it can be known without a
 * node: levels whose paths interpolate nothing are read; a level whose paths interpolate
 * (`%{facts.os.family}`) may give any key found in a data file its path could name; a
 * custom backend (lookup_key, data_dig, a function) or an unreadable file may give any key.
 * Never throws: what cannot be read is uncertain, not an error.
 */
export function readModuleData(moduleDir: string, module: string): ModuleData {
  const label = (name: string) => `${module}/${name}`
  let config: unknown
  const hieraFile = join(moduleDir, 'hiera.yaml')
  const hieraText = readText(hieraFile)
  if (hieraText === null) {
    const provider = readMetadataProvider(moduleDir)
    return provider === null ? {...NO_DATA, module} : anyKey(module, [`${label('metadata.json')} data_provider ${provider}`])
  }

  try {
    config = yaml.load(hieraText)
  } catch {
    return anyKey(module, [`${label('hiera.yaml')} (unreadable)`])
  }

  if (!isMapping(config) || config.version !== 5) return anyKey(module, [`${label('hiera.yaml')} (not version 5)`])
  const defaults = isMapping(config.defaults) ? config.defaults : {}
  const hierarchy = Array.isArray(config.hierarchy) ? config.hierarchy : [{name: 'Common', path: 'common.yaml'}]
  const levels: Level[] = []
  // A file a fact-independent level names is that level's: a node-dependent path such as
  // `%{facts.os.name}.yaml` matches common.yaml only on a node named so, which no fact is.
  const fixed = new Set<string>()
  for (const raw of hierarchy) {
    if (!isMapping(raw)) continue
    for (const key of ['path', 'paths'] as const) for (const p of [raw[key]].flat()) if (typeof p === 'string' && !p.includes('%{')) fixed.add(p.replace(/^\.\//, ''))
  }

  for (const raw of hierarchy) {
    if (!isMapping(raw)) continue
    const name = typeof raw.name === 'string' ? raw.name : '(unnamed level)'
    const level: Level = {name, known: [], maybe: new Set()}
    levels.push(level)
    const backend = backendOf(raw) ?? backendOf(defaults) ?? {kind: 'data_hash', name: 'yaml_data'}
    if (backend.kind !== 'data_hash' || !['yaml_data', 'json_data'].includes(backend.name)) {
      level.maybe = 'any'
      continue
    }

    const datadir = join(moduleDir, typeof raw.datadir === 'string' ? raw.datadir : typeof defaults.datadir === 'string' ? defaults.datadir : 'data')
    const patterns: Array<{pattern: string; glob: boolean}> = []
    for (const key of ['path', 'glob'] as const) if (typeof raw[key] === 'string') patterns.push({pattern: raw[key] as string, glob: key === 'glob'})
    for (const key of ['paths', 'globs'] as const) {
      if (Array.isArray(raw[key])) for (const p of raw[key] as unknown[]) if (typeof p === 'string') patterns.push({pattern: p, glob: key === 'globs'})
    }

    if (Array.isArray(raw.mapped_paths) && typeof raw.mapped_paths[2] === 'string') patterns.push({pattern: raw.mapped_paths[2], glob: false})
    if (patterns.length === 0) {
      level.maybe = 'any'
      continue
    }

    const files = listFiles(datadir)
    for (const {pattern, glob} of patterns) {
      const dependsOnNode = /%\{/.test(pattern) || Array.isArray(raw.mapped_paths)
      const matcher = patternRegExp(pattern, glob)
      for (const file of files.filter((f) => matcher.test(f) && !(dependsOnNode && fixed.has(f)))) {
        const path = join(datadir, file)
        const text = readText(path)
        const data = text === null ? null : parseData(text, backend.name)
        if (data === null) {
          // Puppet would fail on an unreadable data file; statically, any key may be in it.
          if (text !== null) level.maybe = 'any'
          continue
        }

        if (dependsOnNode) {
          if (level.maybe !== 'any') for (const key of Object.keys(data)) level.maybe.add(key)
        } else {
          level.known.push({file: relative(join(moduleDir, '..'), path), data, text: text!})
        }
      }
    }
  }

  return {
    module,
    lookup(key: string): DataLookup {
      // Puppet's module data answers only keys in the module's own namespace.
      if (!key.startsWith(`${module}::`)) return {kind: 'none'}
      const mayOverride: string[] = []
      for (const level of levels) {
        for (const known of level.known) {
          if (!Object.hasOwn(known.data, key)) continue
          const value = known.data[key]
          known.lines ??= topLevelKeyLines(known.text)
          return {kind: 'value', value: {value, file: known.file, line: known.lines.get(key) ?? null, level: level.name, interpolated: hasInterpolation(value)}, mayOverride}
        }

        if (level.maybe === 'any' || level.maybe.has(key)) mayOverride.push(level.name)
      }

      return mayOverride.length > 0 ? {kind: 'maybe', levels: mayOverride} : {kind: 'none'}
    },
  }
}

/** The line of each top-level key of a data file, read once. */
function topLevelKeyLines(text: string): Map<string, number | null> {
  const lines = new Map<string, number | null>()
  const data = parseData(text, 'yaml_data')
  for (const key of Object.keys(data ?? {})) lines.set(key, lineOfKey(text, [key]) ?? null)
  return lines
}

function anyKey(module: string, levels: string[]): ModuleData {
  return {module, lookup: (key) => (key.startsWith(`${module}::`) ? {kind: 'maybe', levels} : {kind: 'none'})}
}

function backendOf(level: Record<string, unknown>): {kind: string; name: string} | null {
  for (const kind of ['data_hash', 'lookup_key', 'data_dig', 'hiera3_backend']) {
    if (typeof level[kind] === 'string') return {kind, name: level[kind] as string}
  }

  return null
}

/** A path or glob relative to the datadir as a RegExp; each `%{...}` matches anything. */
function patternRegExp(pattern: string, glob: boolean): RegExp {
  let out = ''
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]
    if (c === '%' && pattern[i + 1] === '{') {
      const end = pattern.indexOf('}', i)
      if (end !== -1) {
        out += '.*'
        i = end
        continue
      }
    }

    if (glob && c === '*') {
      if (pattern[i + 1] === '*') {
        out += '.*'
        i++
      } else out += '[^/]*'
    } else if (glob && c === '?') out += '[^/]'
    else if (glob && c === '{') out += '(?:'
    else if (glob && c === '}') out += ')'
    else if (glob && c === ',') out += '|'
    else out += c.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
  }

  return new RegExp(`^${out.replace(/^\.\//, '')}$`)
}

function parseData(text: string, backend: string): Record<string, unknown> | null {
  try {
    const data = backend === 'json_data' ? JSON.parse(text) : yaml.load(text)
    if (data === null || data === undefined) return {}
    return isMapping(data) ? data : null
  } catch {
    return null
  }
}

function hasInterpolation(value: unknown): boolean {
  if (typeof value === 'string') return value.includes('%{')
  if (Array.isArray(value)) return value.some(hasInterpolation)
  if (isMapping(value)) return Object.values(value).some(hasInterpolation)
  return false
}

function readMetadataProvider(moduleDir: string): string | null {
  try {
    const provider = JSON.parse(readFileSync(join(moduleDir, 'metadata.json'), 'utf8')).data_provider
    return typeof provider === 'string' && provider !== 'none' ? provider : null
  } catch {
    return null
  }
}

function listFiles(dir: string, prefix = ''): string[] {
  let names: string[]
  try {
    names = readdirSync(join(dir, prefix)).sort()
  } catch {
    return []
  }

  const files: string[] = []
  for (const name of names) {
    const rel = prefix ? `${prefix}/${name}` : name
    let directory = false
    try {
      directory = statSync(join(dir, rel)).isDirectory()
    } catch {
      // Gone or unreadable since readdir: listed as a file, and reading it reports the problem.
    }

    if (directory) files.push(...listFiles(dir, rel))
    else files.push(rel)
  }

  return files
}

function readText(path: string): string | null {
  try {
    return readFileSync(path, 'utf8')
  } catch {
    return null
  }
}
