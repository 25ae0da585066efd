import {readFile, readdir, stat} from 'node:fs/promises'
import {join, relative, resolve} from 'node:path'

import {verifyModulepath} from '../verify/verify.js'
import {ClassCatalog, METAPARAMETERS, classResourceName} from '../catalog/class-catalog.js'
import {type LoadableDefinition, MANIFEST_BYTES_BOUND, fileSize} from '../catalog/definitions.js'
import {unknownClassMessage} from '../catalog/find-classes.js'
import {scanManifest} from '../catalog/manifest-scan.js'
import {isInstance, parseType, valueLabel} from '../catalog/puppet-types.js'
import {DEFAULT_MANIFEST} from '../defaults.js'
import {buildEncDocument, renderEncYaml} from '../enc/enc-document.js'
import {InputError, LocalpuppetError, NotFoundError, PuppetUnavailableError, UsageError, describeFsError} from '../errors.js'
import {checkNodeInput, inputClassNames} from '../input/node-input.js'
import type {Origin} from '../layers/layer-file.js'
import type {Origins} from '../layers/merge.js'
import {layeredInput, layersDirFor} from '../layers/run-layers.js'
import {own} from '../util/own.js'
import {readInputText} from '../input/read-input.js'
import {type Resolution, newTreeMemo, realModuleDir, resolveRelease} from '../release/resolve.js'
import {RUN_ID_PLACEHOLDER} from '../state/run-id.js'
import {closest} from '../util/did-you-mean.js'
import {assertNoTrustProblems, assertTrustedPaths} from '../util/trusted-path.js'
import {type CompileJob, type PuppetChecks, compileCatalogs} from './compile-catalogs.js'
import {identifyPuppet} from '../puppet/puppet-identity.js'
import {effectiveLanguageMode, languageModeArgs} from '../release/language-mode.js'
import {factSets} from './fact-sets.js'
import {lineOfKey} from '../yaml.js'
import {manifestTrustPaths, runTrustPaths} from '../run/trust-paths.js'
import {type CheckName, CHECKS, type InputReport, type Problem, type ValidateReport} from './report.js'
import {type CheckedInput, checkModules, checkVariables, failsOnUnknownVariables, judgedPuppet} from './module-checks.js'

export interface ValidateOptions {
  moduleDir: string
  /** The puppet executable (its Ruby) for the syntax check and --compile; null skips the syntax check. */
  puppet: string | null
  puppetArgs?: string[]
  /** The main manifest, as apply's --manifest; default: DEFAULT_MANIFEST when it exists, else none. */
  manifest?: string
  defaultManifest?: string
  /** Compile each input's catalog with Puppet, as apply would (needs puppet). */
  compile?: boolean
  /** --facts FILE|DIR for --compile; default: this machine's facts. */
  facts?: string
  /** --repo DIR: resolve inputs on a channel through this release repository's index (else: what this node last read). */
  repo?: string
  /** --layers DIR: the layers inputs name (see layers/); else layers/ beside each input, which is then never read as an input. */
  layersDir?: string
  /** The tags channels name (`app/channels/name` → tag), given by the caller (publish: the index it holds); wins over repo. */
  channels?: Record<string, string>
  /** Inputs already read by the caller's reader (publish: the bytes it publishes), by path: checked as they are, not read again. */
  texts?: ReadonlyMap<string, string>
}

/**
 * Everything that would go wrong on a node, for every input, in one pass and without a
 * node: input YAML and schema, release resolution (ranges, immutability, path escape,
 * verification of installed tags), classes Puppet's autoloader cannot find, class
 * parameters they do not declare (metaparameters aside), required parameters neither the
 * input nor the module's data gives, values certainly of the wrong type, Puppet syntax
 * errors of every manifest involved, each file checked on its own, variables Puppet would
 * not find (checkVariables), and modules' metadata.json: whether Puppet loads them and
 * allows the Puppet judged (checkModules). With `compile`,
 * each input's catalog is also compiled by Puppet, as apply would; both in one process
 * that loads Puppet once. Writes nothing: recorded tags are verified with the verification
 * keys plan and apply kept (a file unchanged since is not read again), and none are kept.
 *
 * Each release is read once per call, however many inputs name it: its tree listed, its
 * recorded tag verified, its classes, data and module requirements loaded, each kept for
 * this call only (by real path), so checking a fleet's inputs costs about one release read
 * plus a little per input.
 */
export async function validateInputs(paths: string[], options: ValidateOptions): Promise<ValidateReport> {
  const files = await expandInputs(paths, options.layersDir)
  const moduleDir = await realModuleDir(options.moduleDir)
  const chosen = await chooseManifest(options)
  // A main manifest over the bound is every input's problem, and neither read nor checked.
  const mainOversized = chosen === null || fileSize(chosen) <= MANIFEST_BYTES_BOUND ? null : {file: chosen, bytes: fileSize(chosen)}
  const manifest = mainOversized === null ? chosen : null
  const mainDefinitions: LoadableDefinition[] = manifest === null ? [] : scanManifest(await readFile(manifest, 'utf8'), manifest).map((d) => ({...d, notLoadable: null, entry: null}))
  const facts = options.compile && options.facts !== undefined ? factSets(options.facts, files) : null
  const runsCodeAsRoot = options.compile === true && (process.geteuid?.() ?? 0) === 0
  const catalogs = new Map<string, ClassCatalog>()
  const jobs: Array<CompileJob & {report: InputReport; text: string}> = []
  const reports: CheckedInput[] = []
  const identity = options.puppet === null ? null : identifyPuppet(options.puppet)
  // What one call has already read of each release (see the doc comment): trees, verification, manifest lists.
  const treeMemo = newTreeMemo()
  const verified = new Map<string, Promise<unknown>>()
  const catalogManifests = new Map<ClassCatalog, string[]>()
  // Read once per call, when an input first names a channel (not once per input).
  let channels: Promise<Record<string, string>> | undefined

  for (const file of files) {
    const report: CheckedInput = {file, release: null, problems: [], warnings: [], skipped: {}, languageMode: null, manifests: [], modulepath: [], mode: null, nodeNames: [], classNames: [], catalog: null}
    if (options.compile) report.compile = {status: 'skipped', resources: null, reason: 'the input or its release has problems'}
    reports.push(report)
    // The same reader as apply: FIFOs, devices, oversized files and invalid UTF-8 are refused alike.
    // Run as root to compile, the input is judged as apply judges it (its parameters reach the release's functions).
    let inputUntrusted: string[] = []
    const held = options.texts?.get(file)
    const text = held !== undefined ? held : await readInputText(file, undefined, runsCodeAsRoot ? {allow: true} : undefined)
      .then((read) => {
        inputUntrusted = read.untrusted
        return read.text
      })
      .catch((error) => {
        if (!(error instanceof LocalpuppetError)) throw error
        report.problems.push(problem('input', error.message))
        return null
      })
    if (text === null) continue
    const {input: given, problems} = checkNodeInput(text, file)
    report.problems.push(...problems.map((error) => problem('input', error.message)))
    if (!given) continue
    let input = given

    let resolution: Resolution
    try {
      if (input.app.kind === 'channel') channels ??= options.channels ? Promise.resolve(options.channels) : channelTags(moduleDir, options.repo)
      resolution = await resolveRelease(moduleDir, input.app, {checkTrust: runsCodeAsRoot, channels: input.app.kind === 'channel' ? await channels : undefined, treeMemo})
      await verifyOnce(moduleDir, resolution.modulepath, verified)
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

    // A layered input: the document its release's layer, its layers and itself merge into, each value where it came from.
    let locate = (path: string[]): Origin => ({layer: 'node', file, line: lineOfKey(text, ['classes', ...path]) ?? null})
    try {
      const layered = await layeredInput(given, resolution.modulepath[0], layersDirFor(options, file), true)
      if (layered) {
        input = layered.input
        if (runsCodeAsRoot) inputUntrusted.push(...layered.untrusted)
        locate = (path) => originIn(layered.layers.origins, path) ?? {layer: 'node', file, line: null}
      }
    } catch (error) {
      if (!(error instanceof LocalpuppetError)) throw error
      report.problems.push(problem('input', error.message))
      continue
    }

    report.release = resolution.modulepath[0].release
    report.languageMode = resolution.languageMode
    report.modulepath = resolution.modulepath
    report.mode = effectiveLanguageMode(resolution.languageMode, options.puppetArgs ?? [])
    // The node's top-scope names: the ENC document's parameters, and the facts of --facts.
    const nodeFacts = facts?.get(file)
    report.classNames = inputClassNames(input)
    report.nodeNames = [...Object.keys(buildEncDocument(input, {release: report.release, runId: RUN_ID_PLACEHOLDER}).parameters), ...(nodeFacts && !(nodeFacts instanceof InputError) ? Object.keys(nodeFacts) : [])]

    const modulepath = resolution.modulepath.map((entry) => entry.path)
    const key = modulepath.join(':')
    if (!catalogs.has(key)) catalogs.set(key, new ClassCatalog(modulepath, moduleDir, mainDefinitions, MANIFEST_BYTES_BOUND))
    const catalog = catalogs.get(key)!
    const oversized = [...catalog.definitions.oversized, ...(mainOversized === null ? [] : [mainOversized])]
    for (const {file: big, bytes} of oversized) {
      const shown = big.startsWith(`${moduleDir}/`) ? relative(moduleDir, big) : big
      const message = `${shown}: ${(bytes / 1024 / 1024).toFixed(1)} MiB, over validate's bound of ${MANIFEST_BYTES_BOUND / 1024 / 1024} MiB on one manifest: not checked (Puppet does not parse it, its classes and defines are not read)`
      report.problems.push({check: 'syntax', file: shown, line: null, column: null, message})
    }

    // One list per catalog, shared by its inputs (not a copy of every manifest per input).
    if (!catalogManifests.has(catalog)) catalogManifests.set(catalog, [...catalog.definitions.manifests, ...(manifest === null ? [] : [manifest])])
    report.manifests = catalogManifests.get(catalog)!
    report.catalog = catalog
    report.problems.push(...checkClasses(input.classes, catalog, locate))
    if (!options.compile) continue
    if (oversized.length > 0) {
      report.compile = {status: 'skipped', resources: null, reason: "a manifest is over validate's bound on one manifest's size"}
      continue
    }

    if (runsCodeAsRoot) {
      // Compiling runs the release's Ruby (functions, facts) as root: as apply, only from what nobody else can change.
      // The run's own list (the manifest judged without content: true, as before; apply's plan asks for it).
      const untrusted = [...assertTrustedPaths([...runTrustPaths(options.moduleDir, resolution), ...manifestTrustPaths(manifest, false)], true), ...assertNoTrustProblems(resolution.untrustedTrees, true)]
      for (const message of inputUntrusted) report.problems.push(problem('input', message))
      if (untrusted.length + inputUntrusted.length > 0) {
        const appLine = lineOfKey(text, ['app']) ?? null
        for (const message of untrusted) report.problems.push({check: 'release', file, line: appLine, column: null, message: `${appLine === null ? file : `${file}:${appLine}`}: ${message}`})
        report.compile = {status: 'skipped', resources: null, reason: 'root does not compile code others can change'}
        continue
      }
    }

    const factSet = facts?.get(file) ?? null
    if (factSet instanceof InputError) {
      report.problems.push({check: 'compile', file: null, line: null, column: null, message: `${file}: --facts: ${factSet.message}`})
      report.compile = {status: 'skipped', resources: null, reason: factSet.message}
      continue
    }

    const {splitSecrets, secretsByClass} = await import('../secrets/secret-values.js')
    let split: ReturnType<typeof splitSecrets<typeof input>>
    try {
      split = splitSecrets(input)
    } catch (error) {
      if (!(error instanceof InputError)) throw error
      report.problems.push({check: 'compile', file: null, line: null, column: null, message: error.message})
      report.compile = {status: 'skipped', resources: null, reason: error.message}
      continue
    }

    const enc = renderEncYaml(buildEncDocument(split.input, {release: report.release, runId: RUN_ID_PLACEHOLDER}))
    const secrets = Object.keys(split.secrets).length > 0 ? {secrets: secretsByClass(input, split.secrets)} : {}
    jobs.push({id: String(jobs.length), enc, modulepath, environment: input.environment ?? 'production', manifest, facts: factSet, settings: languageModeArgs(resolution.languageMode), report, text, ...secrets})
  }

  if (options.compile && jobs.length > 0 && options.puppet === null) throw new UsageError('--compile needs puppet (--puppet none only skips the syntax check)')
  // One Ruby process loads Puppet once for the syntax check and the compile alike.
  const manifests = options.puppet === null ? [] : [...new Set([...new Set(reports.map((report) => report.manifests))].flat())].sort()
  const compileJobs = options.compile ? jobs.map(({report: _report, text: _text, ...job}) => job) : []
  // Classes and defines are read for the inputs whose mode makes an unknown variable fail.
  const scopeFiles = options.puppet === null ? [] : [...new Set(reports.filter((report) => failsOnUnknownVariables(report.mode)).flatMap((report) => report.manifests))].sort()
  let checked: PuppetChecks = {syntax: [], results: [], scopes: new Map(), facter: null, library: null}
  let puppetUnavailable: string | null = null
  try {
    if (options.puppet !== null) checked = await compileCatalogs(options.puppet, compileJobs, options.puppetArgs, manifests, scopeFiles)
  } catch (error) {
    // Every input is still reported (CI gets its JUnit): only what needed Puppet is missing.
    if (!(error instanceof PuppetUnavailableError)) throw error
    puppetUnavailable = error.message
    for (const {report} of jobs) report.compile = {status: 'skipped', resources: null, reason: error.message}
  }

  const {syntax, results} = checked
  // Gathered once per list of manifests (inputs on one release share theirs), not once per input.
  const syntaxOf = new Map<string[], Problem[]>()
  for (const report of reports) {
    if (syntax.length === 0) break
    if (!syntaxOf.has(report.manifests)) {
      const mine = new Set(report.manifests)
      syntaxOf.set(
        report.manifests,
        syntax
          .filter((entry) => mine.has(entry.file))
          .map((found): Problem => {
            const shown = relative(moduleDir, found.file)
            const where = `${shown}${found.line ? `:${found.line}` : ''}${found.column ? `:${found.column}` : ''}`
            return {check: 'syntax', file: shown, line: found.line, column: found.column, message: `${where}: ${found.message}`}
          }),
      )
    }

    for (const found of syntaxOf.get(report.manifests)!) report.problems.push({...found})
  }

  for (const [index, result] of results.entries()) {
    const {report, text} = jobs[index]
    report.compile = {status: result.ok ? 'compiled' : 'failed', resources: result.resources, reason: null}
    if (result.error === null) continue
    const {file, line, column} = result.error
    // One line per problem: Puppet lists several mismatches of one class on lines of their own.
    const message = result.error.message.replace(/:\n\s*/, ': ').replaceAll(/\n\s*/g, '; ')
    if (file === null) {
      // About a class of the input (Class[Nova::Db::Mysql], Could not find class x): point at it.
      const named = /Class\[([A-Z][\w:]*)\]|Could not find class (?:::)?([a-z][\w:]*)/.exec(message)
      const inputLine = named ? (lineOfKey(text, ['classes', (named[1] ?? named[2]).toLowerCase()]) ?? null) : null
      const where = inputLine === null ? report.file : `${report.file}:${inputLine}`
      report.problems.push({check: 'compile', file: report.file, line: inputLine, column: null, message: `${where}: ${message}`})
      continue
    }

    const shown = file.startsWith(`${moduleDir}/`) ? relative(moduleDir, file) : file
    const where = `${shown}${line ? `:${line}` : ''}${line && column ? `:${column}` : ''}`
    report.problems.push({check: 'compile', file: shown, line: line ?? null, column: column ?? null, message: `${report.file}: ${where}: ${message}`})
  }

  const judged = judgedPuppet(options.puppet, identity, checked.library, puppetUnavailable)
  await checkModules(reports, judged)
  await checkVariables(reports, checked, {moduleDir, manifest, puppet: options.puppet, puppetUnavailable})
  // Each input's problems in the order of CHECKS (the checks after Puppet's run add theirs last).
  for (const report of reports) report.problems.sort((a, b) => CHECKS.indexOf(a.check) - CHECKS.indexOf(b.check))
  const inputs = reports.map(({manifests: _manifests, modulepath: _modulepath, mode: _mode, nodeNames: _nodeNames, classNames: _classNames, catalog: _catalog, ...report}) => report)
  const checks = CHECKS.filter((check) => check !== 'compile' || options.compile)
  const puppet = identity === null ? null : 'skipped' in judged ? {implementation: identity.implementation, version: identity.version, path: identity.path} : {implementation: judged.implementation, version: judged.version, path: judged.path}
  return {checks, inputs, problems: inputs.reduce((sum, report) => sum + report.problems.length, 0), puppetUnavailable, puppet}
}


/**
 * verifyModulepath, each release verified at most once per call (by its real path and
 * name): the same refusal, for every input on it, as verifying it again would give.
 */
async function verifyOnce(moduleDir: string, modulepath: Resolution['modulepath'], verified: Map<string, Promise<unknown>>): Promise<void> {
  for (const release of modulepath) {
    const key = `${release.path}\0${release.release}`
    // The keys plan and apply kept spare reading what has not changed; validate keeps none (it writes nothing).
    if (!verified.has(key)) verified.set(key, verifyModulepath(moduleDir, [release], undefined, {keepKeys: false}).then(() => null, (error: unknown) => error))
    const error = await verified.get(key)
    if (error !== null) throw error
  }
}

/** Where a class (`[name]`) or class parameter (`[name, param]`) of a layered input came from. */
function originIn(origins: Origins, [name, param]: string[]): Origin | undefined {
  const cls = own(origins.classes, name)
  return param === undefined ? cls?.origin : own(cls?.parameters, param)
}

/** Problems of the classes given, each at the place its class or value came from: the input's line, or another layer's file and line, named. */
function checkClasses(classes: unknown, catalog: ClassCatalog, locate: (path: string[]) => Origin): Problem[] {
  if (classes === undefined || classes === null) return []
  const problems: Problem[] = []
  const entries: Array<[string, Record<string, unknown> | null]> = Array.isArray(classes)
    ? (classes as string[]).map((name) => [name, null])
    : Object.entries(classes as Record<string, Record<string, unknown> | null>)
  for (const [name, params] of entries) {
    const report = (check: CheckName, path: string[], message: string) => {
      const {layer, file, line} = locate(path)
      problems.push({check, file, line, column: null, message: `${line === null ? file : `${file}:${line}`}: ${layer === 'node' ? '' : `layer ${layer}: `}${message}`})
    }

    const definition = catalog.find('class', name)
    if (!definition) {
      report('classes', [name], unknownClassMessage(catalog, name))
      continue
    }

    const where = `(${definition.file}:${definition.line})`
    const resource = classResourceName(name)
    const given = params ?? {}
    for (const [param, value] of Object.entries(given)) {
      const declared = definition.parameters.find((p) => p.name === param)
      if (!declared) {
        // Puppet's parameter struct for a class holds every metaparameter, and `name`.
        if ((METAPARAMETERS as readonly string[]).includes(param) || param === 'name') continue
        const guess = closest(param, [...definition.parameters.map((p) => p.name), ...METAPARAMETERS])
        const list = definition.parameters.length === 0 ? 'it declares none' : `it declares ${definition.parameters.map((p) => p.name).join(', ')}`
        report('parameters', [name, param], `class ${name} has no parameter ${param}${guess ? ` (did you mean ${guess}?)` : ''}; ${list} ${where}`)
        continue
      }

      // An undef value counts as not given: Puppet looks the parameter up, then takes the default.
      if (value === null || declared.type === null) continue
      const type = parseType(declared.type)
      if (type !== null && isInstance(type, value, catalog.aliases) === false) {
        const typeText = declared.type.replaceAll(/\s+/g, ' ')
        const expects = /^(Enum|Pattern)\[/.test(typeText) ? `a match for ${typeText}, got ${typeof value === 'string' ? `'${value.replaceAll("'", "\\'")}'` : valueLabel(value)}` : `${/^[AEIOU]/.test(typeText) ? 'an' : 'a'} ${typeText} value, got ${valueLabel(value)}`
        report('parameters', [name, param], `${resource}: parameter '${param}' expects ${expects} ${where}`)
      }
    }

    for (const declared of definition.parameters) {
      // Given, even as undef (what Puppet then does depends on the type): not reported.
      if (declared.default !== null || Object.hasOwn(given, declared.name)) continue
      // Never missing when the module's data gives it, or might on some node.
      if (catalog.lookup(name, declared.name).kind !== 'none') continue
      report('parameters', [name], `${resource}: expects a value for parameter '${declared.name}' ${where}`)
    }
  }

  return problems
}

/** A message `file:line[:col]: text` as a Problem with its parts. */
function problem(check: CheckName, message: string): Problem {
  const match = /^(.+?):(\d+)(?::(\d+))?: /.exec(message)
  return {check, file: match ? match[1] : (/^([^:]+): /.exec(message)?.[1] ?? null), line: match ? Number(match[2]) : null, column: match?.[3] ? Number(match[3]) : null, message}
}

/** The main manifest as apply chooses it: --manifest (which must exist), else the default one if present, else none. */
async function chooseManifest(options: ValidateOptions): Promise<string | null> {
  if (options.manifest !== undefined) {
    const path = resolve(options.manifest)
    const info = await stat(path).catch((error) => {
      throw describeFsError(error, `manifest ${options.manifest}`)
    })
    if (!info.isFile()) throw new NotFoundError(`manifest ${options.manifest}: not a file`)
    return path
  }

  const fallback = options.defaultManifest ?? DEFAULT_MANIFEST
  return (await stat(fallback).catch(() => null))?.isFile() ? fallback : null
}

/** Files as given, and every *.yaml / *.yml in a directory given (sorted, recursively). */
async function expandInputs(paths: string[], layersDir: string | undefined): Promise<string[]> {
  // Layers are not inputs: --layers DIR's files, or (without it) any directory named layers, the default beside an input.
  const layers = layersDir === undefined ? null : resolve(layersDir)
  const isLayers = (dir: string, name: string) => (layers === null ? name === 'layers' : resolve(dir) === layers)
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
        if (entry.isDirectory()) {
          if (!isLayers(full, entry.name)) await walk(full)
        }        else if (/\.ya?ml$/.test(entry.name)) files.push(full)
      }
    }

    await walk(path)
  }

  if (files.length === 0) throw new NotFoundError(`no input files in ${paths.join(', ')} (*.yaml or *.yml)`)
  return files
}

/** The tags channels name: from the repository's index (--repo), else what this node last read (none when it read nothing). */
async function channelTags(moduleDir: string, repo: string | undefined): Promise<Record<string, string>> {
  if (repo !== undefined) {
    const [{readCurrentIndex}, {indexChannels}] = await Promise.all([import('../repository/index-update.js'), import('../repository/repository-index.js')])
    return indexChannels((await readCurrentIndex(repo)).index)
  }

  const {rememberedChannels} = await import('../source/accepted-versions.js')
  return rememberedChannels(moduleDir).catch(() => ({}))
}
