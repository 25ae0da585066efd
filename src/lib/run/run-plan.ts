import {stat} from 'node:fs/promises'
import {basename, dirname, join, resolve} from 'node:path'

import {type EncDocument, buildEncDocument, renderEncYaml} from '../enc/enc-document.js'
import {missingClasses} from '../catalog/find-classes.js'
import {moduleDirTrustPaths} from '../install/install-record.js'
import {verifyModulepath} from '../verify/verify.js'
import {InputError, NotFoundError, UsageError, describeFsError} from '../errors.js'
import {type NodeInput, inputClassNames} from '../input/node-input.js'
import {scriptInterpreter} from '../util/find-executable.js'
import {type PuppetLocation, describePuppet, locatePuppet} from '../puppet/puppet-identity.js'
import {type LanguageMode, languageModeArgs} from '../release/language-mode.js'
import {type ResolvedRelease, realModuleDir, resolveRelease} from '../release/resolve.js'
import {RUN_ID_PLACEHOLDER} from '../state/run-id.js'
import type {RunFetch} from '../state/run-record.js'
import type {Secret} from '../util/secret.js'
import {type RunFiles, assertStateDirShape, runFiles, stateDirTrustPaths} from '../state/state-dir.js'
import {TrustList} from '../util/trusted-path.js'
import {type PlanLayers, layeredInput} from '../layers/run-layers.js'
import {manifestTrustPaths, runTrustPaths} from './trust-paths.js'

import {DEFAULT_MANIFEST} from '../defaults.js'

export interface PlanOptions {
  moduleDir: string
  stateDir: string
  /** --manifest; when absent, DEFAULT_MANIFEST if it exists, else an empty manifest. */
  manifest?: string
  defaultManifest?: string
  /** --puppet: a command name looked up on PATH, or a path. */
  puppet: string
  noop?: boolean
  /** Let puppet colour its output (a terminal is watching); otherwise --color false. */
  color?: boolean
  detailedExitcodes?: boolean
  /** --fact NAME=VALUE, already split. */
  facts?: Record<string, string>
  allowMutable?: boolean
  timeoutSeconds?: number
  /** Arguments after `--`, passed to puppet as they are. */
  puppetArgs?: string[]
  env?: NodeJS.ProcessEnv
  /** --allow-untrusted: use a state dir, module dir or release others can write (recorded). */
  allowUntrusted?: boolean
  /** What --fetch brought from the source before resolving: recorded in the plan and the run record. */
  fetched?: RunFetch | null
  /** Trust problems --allow-untrusted already let through before the plan (the input file): recorded with the rest. */
  untrusted?: string[]
  /** --replay: the language mode that run was recorded with, instead of the release's. */
  languageMode?: LanguageMode
  /** Where the layers the input names are read from (see layers/); none: an input naming layers is refused (66). */
  layersDir?: string | import('../layers/resolve-layers.js').LayerSource
  /** --replay of a layered run: its computed document is the input, its layers as recorded (nothing merged again). */
  layered?: NonNullable<import('../state/run-record.js').RunRecord['layers']>
  /** Whether the run's facts and catalog are kept for PuppetDB; when absent, whether the puppetdb setting is set. */
  puppetdb?: boolean
}

export type {RunFetch} from '../state/run-record.js'

/**
 * Everything a run will do, as data: `plan` prints it, `apply` executes it. Building it
 * reads the input, the module directory and PATH, and writes nothing.
 */
export interface RunPlan {
  /** The plan's JSON format (integrations/schema/plan.schema.json); bumped on incompatible changes. */
  format: 1
  runId: string
  /** The release that will run (`foo/tags/1.4.0`) and the reference as written. */
  release: string
  ref: string
  moduleDir: string
  /** Real absolute paths, the release root first. */
  modulepath: string[]
  releases: ResolvedRelease[]
  /** Each tag on the modulepath that has an install record, checked against it before anything runs. */
  verification: Array<{release: string; verified: boolean}>
  /** Tags on the modulepath with no install record (put there by hand, or swapped): nothing to verify them against; each is a warning. */
  unverified: string[]
  allowMutable: boolean
  mutableEntries: string[]
  warnings: string[]
  /** --allow-untrusted: the trust problems it let through (see util/trusted-path.ts). */
  allowUntrusted: boolean
  untrusted: string[]
  enc: EncDocument
  /** The bytes the ENC script prints. */
  encYaml: string
  environment: string
  manifest: {path: string; source: 'flag' | 'default' | 'empty'}
  /**
   * The puppet setting (`command`), the executable it found (`path`) and how (`found`), and which Puppet
   * that is: `implementation` (puppet or openvox, from the package or gem that owns it) and `version`,
   * both null when neither owns it.
   */
  puppet: PlanPuppet
  /** How the release's code compiles (Puppet's strict and strict_variables), passed to Puppet explicitly. */
  languageMode: LanguageMode
  /** The exact argv puppet is started with. */
  command: string[]
  /** The arguments given after `--`, as they are passed to puppet. */
  puppetArgs: string[]
  /** The directory puppet starts in: the run directory when the state dir's path holds whitespace (see externalNodes), else null (localpuppet's own). */
  cwd: string | null
  /** Extra environment for puppet: FACTER_<name> for each --fact. */
  env: Record<string, string>
  facts: Record<string, string>
  noop: boolean
  detailedExitcodes: boolean
  timeoutSeconds: number | null
  input: {source: string; digest: string; document: Record<string, unknown>}
  stateDir: string
  files: RunFiles
  /** apply --replay: the run whose release, ENC document, facts, manifest and puppet arguments this plan repeats. */
  replayOf?: string
  /** What --fetch brought before resolving; absent without --fetch. */
  fetch?: RunFetch
  /** A layered input (see layers/): every layer merged, in order, with its digest, and the origin of every class and value of `enc`; absent for a flat input. */
  layers?: PlanLayers
  /** The input's secrets (`!secret`) by Hiera key, kept out of the ENC; shown redacted (util/secret.ts). Absent when none. */
  secrets?: Record<string, Secret>
}

/** See RunPlan.puppet. */
export interface PlanPuppet {
  command: string
  path: string | null
  found: PuppetLocation['found']
  implementation: 'puppet' | 'openvox' | null
  version: string | null
}

/** Builds the plan for one run. With no runId, paths and the ENC show `<run-id>`. */
export async function buildRunPlan(input: NodeInput, options: PlanOptions, runId = RUN_ID_PLACEHOLDER): Promise<RunPlan> {
  const stateDir = resolve(options.stateDir)
  const allow = Boolean(options.allowUntrusted)
  // Judged as written (66 first when it is missing): a link on the way is judged too, so its real path cannot change after.
  const trust = new TrustList(allow, options.untrusted).add(...moduleDirTrustPaths(options.moduleDir), ...stateDirTrustPaths(stateDir))
  await realModuleDir(options.moduleDir)
  trust.check()
  assertStateDirShape(stateDir)
  // An app on a channel that no fetch pinned (no --fetch, or the source unreachable): the tag the channel named when the node last read the index.
  const channels = input.app.kind === 'channel' ? await (await import('../source/accepted-versions.js')).rememberedChannels(options.moduleDir, allow) : undefined
  const resolution = await resolveRelease(options.moduleDir, input.app, {allowMutable: options.allowMutable, checkTrust: true, allowUntrusted: allow, channels})
  const files = runFiles(stateDir, runId)
  const manifest = await chooseManifest(options, files)
  const location = locatePuppet(options.puppet, options.env)
  const puppetPath = location.path
  // And the interpreter its #! line runs (`#!/usr/bin/env ruby`: the ruby on PATH).
  const interpreter = puppetPath === null ? null : scriptInterpreter(puppetPath, options.env ?? process.env)?.path
  // Everything root will read and run, judged before any of it is read: the releases (their
  // directories, then everything inside each), the main manifest, puppet (a puppet others
  // could rewrite would run their code as root) and its interpreter.
  trust
    .add(...runTrustPaths(options.moduleDir, resolution))
    .addProblems(resolution.untrustedTrees)
    .add(...manifestTrustPaths(manifest.source === 'empty' ? null : manifest.path, true))
  if (puppetPath !== null) trust.add({path: puppetPath, what: 'puppet executable', content: true})
  if (interpreter) trust.add({path: interpreter, what: `interpreter of ${puppetPath}`, content: true})
  const untrusted = trust.check()
  const verification = await verifyModulepath(resolution.moduleDir, resolution.modulepath, resolution.trees)
  const app = resolution.modulepath[0]
  // The release's own layer, the layers the input names and the input itself, merged: what Puppet receives.
  const layered = options.layered ? {input, layers: {layers: options.layered.layers, origins: {classes: {}, parameters: {}}}, untrusted: []} : await layeredInput(input, app, options.layersDir, allow)
  if (layered) for (const problem of layered.untrusted) untrusted.push(problem)
  const given = input
  input = layered?.input ?? input
  // Secrets (!secret) stay out of the ENC: Puppet gets them from a Hiera layer, as Sensitive (secrets/hiera-secrets.ts).
  const {splitSecrets} = await import('../secrets/secret-values.js')
  const {input: encInput, secrets} = splitSecrets(input)
  const hasSecrets = Object.keys(secrets).length > 0
  // Their digests keyed by the node's key (shown as `hidden` where there is none): plan, run.json, hooks and the fingerprint alike.
  if (hasSecrets) {
    const {keySecretDigests, secretDigestKey} = await import('../secrets/secret-digest.js')
    keySecretDigests(await secretDigestKey(stateDir), secrets, given, input)
  }

  const secretArgs = hasSecrets ? (await import('../secrets/hiera-secrets.js')).secretPuppetArgs(files.dir) : null
  const enc = buildEncDocument(encInput, {release: app.release, runId})
  const environment = input.environment ?? 'production'
  // A class Puppet cannot find fails the run inside Puppet after seconds of start-up: refused
  // here instead (65, recorded), in validate's words, before anything runs.
  const missing = await missingClasses(inputClassNames(input), resolution.modulepath.map((entry) => entry.path), manifest.source === 'empty' ? null : manifest.path)
  if (missing.length > 0) throw new InputError(`${input.source}: release ${app.release}: ${missing.length === 1 ? missing[0].message : missing.map((found, n) => `(${n + 1}) ${found.message}`).join(' ')}`, [`localpuppet classes ${app.release} lists the classes it provides`])
  const facts = options.facts ?? {}
  const modulepath = resolution.modulepath.map((entry) => entry.path)
  const warnings = [...resolution.warnings]
  if (resolution.mutableEntries.length > 0) {
    warnings.push(`--allow-mutable: ${app.release} runs with mutable ${resolution.mutableEntries.map((entry) => entry.ref).join(', ')}`)
  }

  // A tag without an install record may be anything: it runs (a hand-made tag is no
  // error; with --trust, install and fetch already refuse unsigned archives), but never
  // silently.
  const verified = new Set(verification.map((entry) => entry.release))
  const unverified = resolution.modulepath.filter((entry) => entry.kind === 'tag' && !verified.has(entry.release))
  for (const entry of unverified) warnings.push(`${entry.path} has no install record, so it cannot be verified; install it with localpuppet install or remove it`)
  if (puppetPath === null) warnings.push(`puppet not found: ${options.puppet}`)
  for (const problem of untrusted) warnings.push(`--allow-untrusted: ${problem}`)

  const external = externalNodes(files.encScript)
  const command = [
    puppetPath ?? options.puppet,
    'apply',
    '--detailed-exitcodes',
    '--node_terminus',
    'exec',
    '--external_nodes',
    external.setting,
    '--modulepath',
    [...modulepath, ...(secretArgs ? [secretArgs.modulepath] : [])].join(':'),
    '--environmentpath',
    files.environmentPath,
    '--environment',
    environment,
    '--lastrunfile',
    files.summary,
    '--lastrunreport',
    files.report,
    ...languageModeArgs(options.languageMode ?? resolution.languageMode),
    // With PuppetDB: Puppet keeps the facts it found and the catalog it compiled in the run's directory, for the commands sent after the run.
    ...((options.puppetdb ?? (await puppetDbConfigured())) ? puppetDbArgs(files.dir) : []),
    // Puppet's default report processor (store) keeps every run's report forever under its
    // reportdir; the run directory already has this run's. Unless the user asks for reports.
    ...(asksForReports(options.puppetArgs ?? []) ? [] : ['--reports', 'none']),
    ...(options.color ? [] : ['--color', 'false']),
    ...(options.noop ? ['--noop'] : []),
    ...(secretArgs?.args ?? []),
    ...(options.puppetArgs ?? []),
    manifest.path,
  ]

  return {
    format: 1,
    runId,
    release: app.release,
    ref: input.app.text,
    moduleDir: resolution.moduleDir,
    modulepath,
    releases: resolution.modulepath,
    verification,
    unverified: unverified.map((entry) => entry.release),
    allowMutable: Boolean(options.allowMutable),
    mutableEntries: resolution.mutableEntries.map((entry) => entry.ref),
    warnings,
    allowUntrusted: allow,
    untrusted: [...new Set(untrusted)],
    enc,
    encYaml: renderEncYaml(enc),
    environment,
    manifest,
    puppet: {command: options.puppet, found: location.found, ...describePuppet(puppetPath)},
    languageMode: options.languageMode ?? resolution.languageMode,
    command,
    puppetArgs: options.puppetArgs ?? [],
    cwd: external.cwd,
    env: {...Object.fromEntries(Object.entries(facts).map(([name, value]) => [`FACTER_${name}`, value]))},
    facts,
    noop: Boolean(options.noop),
    detailedExitcodes: Boolean(options.detailedExitcodes),
    timeoutSeconds: options.timeoutSeconds ?? null,
    input: {source: given.source, digest: given.digest, document: given.raw},
    stateDir,
    files,
    ...(options.fetched ? {fetch: options.fetched} : {}),
    ...(layered ? {layers: layered.layers} : {}),
    ...(hasSecrets ? {secrets} : {}),
  }
}

/**
 * The `--external_nodes` setting for the ENC script. Puppet splits it on whitespace (and
 * expands `$name` in it), so a script path with a space (a state dir such as
 * `/srv/local puppet`) is named relative to the run directory, which puppet then starts
 * in: `/bin/sh enc`.
 */
export function externalNodes(script: string): {setting: string; cwd: string | null} {
  if (!/\s/.test(script)) return {setting: script, cwd: null}
  return {setting: `/bin/sh ${basename(script)}`, cwd: dirname(script)}
}

async function puppetDbConfigured(): Promise<boolean> {
  const {settingString} = await import('../config/settings.js')
  return (await settingString('puppetdb')) !== null
}

/** Puppet's arguments that leave a run's facts and catalog in its directory (puppetdb/after-run.ts reads them). */
export function puppetDbArgs(runDir: string): string[] {
  return ['--route_file', join(runDir, 'routes.yaml'), '--catalog_cache_terminus', 'json', '--client_datadir', join(runDir, 'client_data')]
}

/** Whether the arguments for puppet choose report processors themselves (`--reports http`, `--no-report`). */
function asksForReports(args: string[]): boolean {
  return args.some((arg) => /^--(?:no-)?reports?(?:=|$)/.test(arg))
}

/** Parses repeated `--fact NAME=VALUE` flags; 64 on a malformed one. */
export function parseFacts(pairs: string[]): Record<string, string> {
  const facts: Record<string, string> = {}
  for (const pair of pairs) {
    const eq = pair.indexOf('=')
    const name = eq === -1 ? '' : pair.slice(0, eq)
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) {
      throw new UsageError(`--fact ${JSON.stringify(pair)}: expected NAME=VALUE with NAME made of letters, digits and underscores`)
    }

    facts[name] = pair.slice(eq + 1)
  }

  return facts
}

async function chooseManifest(options: PlanOptions, files: RunFiles): Promise<RunPlan['manifest']> {
  if (options.manifest !== undefined) {
    const path = resolve(options.manifest)
    try {
      if (!(await stat(path)).isFile()) throw new NotFoundError(`manifest ${options.manifest}: not a file`)
    } catch (error) {
      if (error instanceof NotFoundError) throw error
      throw describeFsError(error, `manifest ${options.manifest}`)
    }

    return {path, source: 'flag'}
  }

  const fallback = options.defaultManifest ?? DEFAULT_MANIFEST
  try {
    if ((await stat(fallback)).isFile()) return {path: fallback, source: 'default'}
  } catch {
    // No default manifest: the run uses an empty one.
  }

  return {path: files.emptyManifest, source: 'empty'}
}
