import {relative, resolve} from 'node:path'

import type {ClassCatalog} from '../catalog/class-catalog.js'
import {type ModuleFacts, moduleFacts} from '../catalog/module-facts.js'
import {runsAsRuby} from '../catalog/puppet-ruby.js'
import {identifyLibrary, type identifyPuppet} from '../puppet/puppet-identity.js'
import type {LanguageMode} from '../release/language-mode.js'
import type {Resolution} from '../release/resolve.js'
import type {PuppetChecks} from './compile-catalogs.js'
import {type ModuleFinding, type ModuleMetadata, type RunningPuppet, metadataFindings, readModuleMetadata, requirementFindings} from './module-requirements.js'
import type {InputReport} from './report.js'
import {type VariableIndex, unknownVariables, variableIndex} from './undefined-variables.js'

/*
 * The checks validate makes once Puppet's Ruby has parsed every manifest: each module's
 * metadata.json against the judged Puppet, and the variables Puppet would not find.
 */

/** An input as validate checks it: its report, and what the checks after Puppet's run need of it. */
export type CheckedInput = InputReport & {
  manifests: string[]
  /** The releases of its modulepath (none when it did not resolve). */
  modulepath: Resolution['modulepath']
  /** The release's language mode as Puppet would get it (the arguments for puppet win), or null. */
  mode: (LanguageMode & {overridden: boolean}) | null
  /** Its top-scope names: the ENC document's parameters and the facts of --facts. */
  nodeNames: string[]
  /** The classes it gives the node. */
  classNames: string[]
  /** The classes and defines of its modulepath and main manifest, as Puppet's autoloader finds them. */
  catalog: ClassCatalog | null
}

export type JudgedPuppet = (RunningPuppet & {implementation: 'puppet' | 'openvox'; version: string}) | {skipped: string}

/**
 * The Puppet module requirements are judged against: the one validate runs, as what owns
 * it tells (identifyPuppet); else, for a Ruby script (a gem's wrapper, which names its gem
 * but not its version), what its own Ruby loaded in validate's Puppet process: that
 * library's version and whose it is. A shell wrapper's Puppet is not guessed at.
 */
export function judgedPuppet(path: string | null, identity: ReturnType<typeof identifyPuppet> | null, library: PuppetChecks['library'], unavailable: string | null): JudgedPuppet {
  if (path === null || identity === null) return {skipped: 'requirements not checked: --puppet none, so no Puppet to check them against'}
  if (identity.implementation !== null && identity.version !== null) return {implementation: identity.implementation, version: identity.version, path}
  const cannot = `requirements not checked: cannot tell which Puppet ${path} is`
  if (unavailable !== null) return {skipped: `${cannot} (neither a package nor a gem owns it, and it could not be run)`}
  if (library !== null && runsAsRuby(path)) {
    const loaded = library.file === null ? null : identifyLibrary(library.file)
    const implementation = identity.implementation ?? loaded?.implementation ?? null
    if (implementation !== null && (loaded === null || loaded.implementation === implementation)) return {implementation, version: library.version, path}
    return {skipped: `${cannot} (its Ruby loads ${library.file ?? 'a Puppet library'}, which neither a package nor a gem owns)`}
  }

  return {skipped: `${cannot} (neither a package nor a gem owns it: a wrapper script?)`}
}

/**
 * Each input's modules, by their metadata.json: whether Puppet loads them (under the
 * input's `strict`, see metadataFindings) and whether they allow the judged Puppet
 * (requirementFindings); each release's metadata read once per call.
 */
export async function checkModules(reports: CheckedInput[], judged: JudgedPuppet): Promise<void> {
  const read = new Map<string, Promise<ModuleMetadata[]>>()
  for (const report of reports) {
    if (report.modulepath.length === 0 || report.mode === null) continue
    if ('skipped' in judged) {
      report.skipped.requirements = judged.skipped
      report.warnings.push({check: 'requirements', file: null, line: null, column: null, message: `${report.file}: ${judged.skipped}`})
    }

    for (const entry of report.modulepath) {
      if (!read.has(entry.path)) read.set(entry.path, readModuleMetadata(entry.path))
      const metadata = await read.get(entry.path)!
      const add = (check: 'metadata' | 'requirements', findings: ModuleFinding[]) => {
        for (const found of findings) (found.severity === 'problem' ? report.problems : report.warnings).push({check, file: found.file, line: found.line, column: null, message: `${report.file}: ${found.message}`})
      }

      add('metadata', metadataFindings(metadata, entry.release, report.mode.strict, 'skipped' in judged ? null : judged.version))
      if (!('skipped' in judged)) add('requirements', requirementFindings(metadata, entry.release, judged))
    }
  }
}

/** Whether Puppet fails to compile code that reads an unknown variable in this mode (tried on 7.23 and 8.10: under strict_variables, and under strict: error whatever strict_variables says). */
export function failsOnUnknownVariables(mode: LanguageMode | null): boolean {
  return mode !== null && (mode.strictVariables || mode.strict === 'error')
}

/**
 * The variables each input's classes and defines read that Puppet would not find
 * (unknownVariables), for the inputs whose mode makes that fail: a problem where Puppet
 * certainly evaluates the read, a warning where code it may skip reads it. The other
 * inputs' `variables` check is skipped, saying why.
 */
export async function checkVariables(reports: CheckedInput[], checked: PuppetChecks, context: {moduleDir: string; manifest: string | null; puppet: string | null; puppetUnavailable: string | null}): Promise<void> {
  const mainUses = context.manifest === null ? [] : (checked.scopes.get(context.manifest)?.uses ?? [])
  const facts = new Map<string, Promise<ModuleFacts>>()
  // One index per modulepath (its inputs share their list of manifests and their catalog).
  const indexes = new Map<string[], VariableIndex>()
  for (const report of reports) {
    if (report.mode === null) continue
    if (!failsOnUnknownVariables(report.mode)) {
      report.skipped.variables = `not checked: under strict: ${report.mode.strict} with strict_variables: false Puppet does not fail on an unknown variable`
      continue
    }

    if (context.puppet === null || context.puppetUnavailable !== null) {
      report.skipped.variables = context.puppet === null ? 'not checked: --puppet none (Puppet reads the classes)' : `not checked: ${context.puppetUnavailable}`
      continue
    }

    const releaseFacts: ModuleFacts[] = []
    for (const entry of report.modulepath) {
      if (!facts.has(entry.path)) facts.set(entry.path, moduleFacts(entry.path))
      releaseFacts.push(await facts.get(entry.path)!)
    }

    const catalog = report.catalog
    const loads = (definition: {kind: 'class' | 'define'; name: string}, file: string) => {
      const found = catalog?.find(definition.kind, definition.name)
      return found !== undefined && resolve(context.moduleDir, found.file) === file
    }

    if (!indexes.has(report.manifests)) indexes.set(report.manifests, variableIndex({files: report.manifests, scopes: checked.scopes, loads}))
    const index = indexes.get(report.manifests)!
    const {unknown, skipped} = unknownVariables({files: report.manifests, scopes: checked.scopes, facter: checked.facter, moduleFacts: releaseFacts, nodeNames: report.nodeNames, roots: [...report.classNames.map((name): [string, boolean] => [name, false]), ...mainUses], loads, index})
    if (skipped !== null) report.skipped.variables = `not checked: ${skipped}`
    const mode = report.mode
    const setting = mode.strictVariables ? 'strict_variables: true' : 'strict: error'
    const source = mode.overridden ? 'set in the arguments for puppet' : mode.pinned === null ? "the default: the release pins neither, so Puppet 8's" : `pinned by ${mode.pinned}`
    for (const found of unknown) {
      const shown = relative(context.moduleDir, found.file)
      const why =
        found.legacy === null
          ? 'no parameter, local variable, ENC parameter or fact has that name'
          : `a legacy fact, which this Puppet does not collect (include_legacy_facts is false)${found.legacy === '' ? '' : `: use $facts${found.legacy.split('.').map((part) => `['${part}']`).join('')}`}`
      const fails = `Puppet fails on it under ${setting} (${source})`
      const message = `${shown}:${found.line}:${found.column}: Unknown variable: '${found.written}' in ${found.definition.kind} ${found.definition.name}: ${why}; ${found.certain ? fails : `${fails} if it evaluates this code, which depends on a condition, a loop, a default or a conditional declaration`}`
      ;(found.certain ? report.problems : report.warnings).push({check: 'variables', file: shown, line: found.line, column: found.column, message})
    }
  }
}
