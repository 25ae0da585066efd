import {readdir, stat} from 'node:fs/promises'
import {join, relative} from 'node:path'

import {verifyModulepath} from '../archive/verify.js'
import {type ModuleDefinitions, autoloadPath, readDefinitions} from '../catalog/definitions.js'
import {validateManifests} from '../catalog/parser-validate.js'
import {LocalpuppetError, NotFoundError, describeFsError} from '../errors.js'
import {checkNodeInput} from '../input/node-input.js'
import {readInputText} from '../input/read-input.js'
import {type Resolution, realModuleDir, resolveRelease} from '../release/resolve.js'
import {closest} from '../util/did-you-mean.js'
import {lineOfKey} from '../yaml.js'

/** The checks run on every input; each is one JUnit test case. */
export const CHECKS = ['input', 'release', 'classes', 'parameters', 'syntax'] as const
export type CheckName = (typeof CHECKS)[number]

export interface Problem {
  check: CheckName
  /** The file at fault (an input, a manifest.yaml, a .pp file), or null. */
  file: string | null
  line: number | null
  column: number | null
  /** The whole one-line message, file and line included. */
  message: string
}

export interface InputReport {
  file: string
  /** The release the input resolved to, or null. */
  release: string | null
  problems: Problem[]
}

export interface ValidateReport {
  inputs: InputReport[]
  problems: number
}

export interface ValidateOptions {
  moduleDir: string
  /** The puppet executable for `puppet parser validate`; null skips the syntax check. */
  puppet: string | null
  puppetArgs?: string[]
}

/**
 * Everything that would go wrong on a node, for every input, in one pass and without a
 * node: input YAML and schema, release resolution (ranges, immutability, path escape,
 * verification of installed tags), classes missing from the modulepath and class
 * parameters they do not declare, and Puppet syntax errors, found by one `puppet parser
 * validate` over every manifest involved. Writes nothing.
 */
export async function validateInputs(paths: string[], options: ValidateOptions): Promise<ValidateReport> {
  const files = await expandInputs(paths)
  const moduleDir = await realModuleDir(options.moduleDir)
  const definitionsCache = new Map<string, ModuleDefinitions>()
  const reports: Array<InputReport & {manifests: string[]}> = []

  for (const file of files) {
    const report: InputReport & {manifests: string[]} = {file, release: null, problems: [], manifests: []}
    reports.push(report)
    // The same reader as apply: FIFOs, devices, oversized files and invalid UTF-8 are refused alike.
    const text = await readInputText(file)
      .then((read) => read.text)
      .catch((error) => {
        if (!(error instanceof LocalpuppetError)) throw error
        report.problems.push(problem('input', error.message))
        return null
      })
    if (text === null) continue
    const {input, problems} = checkNodeInput(text, file)
    report.problems.push(...problems.map((error) => problem('input', error.message)))
    if (!input) continue

    let resolution: Resolution
    try {
      resolution = await resolveRelease(moduleDir, input.app)
      await verifyModulepath(moduleDir, resolution.modulepath)
    } catch (error) {
      if (!(error instanceof LocalpuppetError)) throw error
      // A manifest.yaml entry's error names that file and line; anything else is the input's app.
      const inManifest = /^(.+?\/manifest\.yaml):(\d+): /.exec(error.message)
      const appLine = lineOfKey(text, ['app']) ?? null
      report.problems.push(
        inManifest
          ? {check: 'release', file: inManifest[1], line: Number(inManifest[2]), column: null, message: `${file}: ${error.message}`}
          : {check: 'release', file, line: appLine, column: null, message: `${appLine === null ? file : `${file}:${appLine}`}: ${error.message}`},
      )
      continue
    }

    report.release = resolution.modulepath[0].release
    const modulepath = resolution.modulepath.map((entry) => entry.path)
    const key = modulepath.join(':')
    if (!definitionsCache.has(key)) definitionsCache.set(key, readDefinitions(modulepath, moduleDir))
    const definitions = definitionsCache.get(key)!
    report.manifests = definitions.manifests
    report.problems.push(...checkClasses(input.classes, definitions, text, file))
  }

  if (options.puppet !== null) {
    const manifests = [...new Set(reports.flatMap((report) => report.manifests))].sort()
    const syntax = await validateManifests(options.puppet, manifests, options.puppetArgs)
    for (const report of reports) {
      const mine = new Set(report.manifests)
      for (const found of syntax.filter((entry) => mine.has(entry.file))) {
        const shown = relative(moduleDir, found.file)
        const where = `${shown}${found.line ? `:${found.line}` : ''}${found.column ? `:${found.column}` : ''}`
        report.problems.push({check: 'syntax', file: shown, line: found.line, column: found.column, message: `${where}: ${found.message}`})
      }
    }
  }

  const inputs = reports.map(({manifests: _manifests, ...report}) => report)
  return {inputs, problems: inputs.reduce((sum, report) => sum + report.problems.length, 0)}
}

function checkClasses(classes: unknown, definitions: ModuleDefinitions, text: string, file: string): Problem[] {
  if (classes === undefined || classes === null) return []
  const problems: Problem[] = []
  const classDefs = new Map(definitions.definitions.filter((d) => d.kind === 'class').map((d) => [d.name, d]))
  const defines = new Set(definitions.definitions.filter((d) => d.kind === 'define').map((d) => d.name))
  const entries: Array<[string, Record<string, unknown> | null]> = Array.isArray(classes)
    ? (classes as string[]).map((name) => [name, null])
    : Object.entries(classes as Record<string, Record<string, unknown> | null>)
  for (const [name, params] of entries) {
    const at = (...path: string[]) => {
      const line = lineOfKey(text, ['classes', ...path]) ?? findListItem(text, name)
      return {where: line === undefined ? file : `${file}:${line}`, line: line ?? null}
    }

    const definition = classDefs.get(name)
    if (!definition) {
      const {where, line} = at(name)
      const guess = closest(name, classDefs.keys())
      const why = defines.has(name) ? `${name} is a defined type, not a class` : `class ${name} is not defined on the modulepath (Puppet looks in ${autoloadPath(name)})`
      problems.push({check: 'classes', file, line, column: null, message: `${where}: ${why}${guess && !defines.has(name) ? `; did you mean ${guess}?` : ''}`})
      continue
    }

    for (const param of Object.keys(params ?? {})) {
      if (definition.parameters.some((declared) => declared.name === param)) continue
      const {where, line} = at(name, param)
      const guess = closest(param, definition.parameters.map((declared) => declared.name))
      const declared = definition.parameters.length === 0 ? 'it declares none' : `it declares ${definition.parameters.map((p) => p.name).join(', ')}`
      problems.push({
        check: 'parameters',
        file,
        line,
        column: null,
        message: `${where}: class ${name} has no parameter ${param}${guess ? ` (did you mean ${guess}?)` : ''}; ${declared} (${definition.file}:${definition.line})`,
      })
    }
  }

  return problems
}

/** The line naming a class in a list (`- name` or `[a, name]`), from the classes key on. */
function findListItem(text: string, name: string): number | undefined {
  const lines = text.split(/\r?\n/)
  const from = Math.max(0, (lineOfKey(text, ['classes']) ?? 1) - 1)
  const token = new RegExp(`(^|[\\s\\[,'"-])${name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}($|[\\s\\],'"#])`)
  for (let i = from; i < lines.length; i++) if (token.test(lines[i].replace(/^\s*classes\s*:/, ''))) return i + 1
  return undefined
}

/** A message `file:line[:col]: text` as a Problem with its parts. */
function problem(check: CheckName, message: string): Problem {
  const match = /^(.+?):(\d+)(?::(\d+))?: /.exec(message)
  return {check, file: match ? match[1] : (/^([^:]+): /.exec(message)?.[1] ?? null), line: match ? Number(match[2]) : null, column: match?.[3] ? Number(match[3]) : null, message}
}

/** Files as given, and every *.yaml / *.yml in a directory given (sorted, recursively). */
async function expandInputs(paths: string[]): Promise<string[]> {
  const files: string[] = []
  for (const path of paths) {
    let info
    try {
      info = await stat(path)
    } catch (error) {
      throw describeFsError(error, `input ${path}`)
    }

    if (!info.isDirectory()) {
      files.push(path)
      continue
    }

    const walk = async (dir: string): Promise<void> => {
      for (const entry of (await readdir(dir, {withFileTypes: true})).sort((a, b) => (a.name < b.name ? -1 : 1))) {
        const full = join(dir, entry.name)
        if (entry.isDirectory()) await walk(full)
        else if (/\.ya?ml$/.test(entry.name)) files.push(full)
      }
    }

    await walk(path)
  }

  if (files.length === 0) throw new NotFoundError(`no input files in ${paths.join(', ')} (*.yaml or *.yml)`)
  return files
}
