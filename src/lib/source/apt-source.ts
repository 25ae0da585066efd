import {readRecordFields} from '../install/install-record.js'
import {PACKAGE_PREFIX, appPrefix, packageName, parsePackageName} from '../deb/package-name.js'
import {LocalpuppetError, NotFoundError, UsageError} from '../errors.js'
import {ExitCode} from '../exit-codes.js'
import {type ReleaseRef, maxSatisfyingTag, parseReleaseRef, sortTagsNewestFirst} from '../release/release-ref.js'
import {realModuleDir} from '../release/resolve.js'
import type {FetchOptions, FetchResult, FetchedRelease, ReleaseSource} from './release-source.js'
import {type Captured, capture} from '../util/capture.js'

/** apt failed; the exit code says how (see APT_EXIT_CODES). The message is apt's own. */
export class AptError extends LocalpuppetError {
  constructor(exitCode: number, message: string, suggestions: string[] = []) {
    super('apt', exitCode, message, suggestions)
  }
}

export interface AptOptions {
  /** Extra `-o Key=Value` settings for apt-cache and apt-get (tests use a private configuration). */
  aptOptions?: string[]
  /** Added to apt's environment (e.g. APT_CONFIG). */
  env?: Record<string, string | undefined>
  /** How long apt-get waits for dpkg's lock held by another package manager, in seconds. */
  lockTimeout?: number
}

export interface AptFetchOptions extends AptOptions {
  moduleDir: string
  refs: string[]
}

/** One release asked for, as fetch reports it, with the package that carries it. */
export interface AptFetchedRelease extends FetchedRelease {
  package: string
}

export interface AptFetchResult extends FetchResult {
  source: 'apt'
  releases: AptFetchedRelease[]
}

/**
 * apt as a release source for `fetch` and `apply --fetch` (`--source apt`, `source: apt`):
 * apt's own keys and signatures protect it, so --trust and --insecure do not apply.
 */
export class AptSource implements ReleaseSource {
  readonly label = 'apt'

  constructor(private readonly options: AptOptions = {}) {}

  async fetch(refs: string[], options: FetchOptions): Promise<AptFetchResult> {
    return fetchWithApt({...this.options, env: {...this.options.env, ...pickAptEnv(options.env)}, moduleDir: options.moduleDir, refs})
  }

  async close(): Promise<void> {}
}

/** The variables apt itself reads, when a caller passes an environment of its own. */
function pickAptEnv(env: NodeJS.ProcessEnv | undefined): Record<string, string | undefined> {
  if (!env) return {}
  return Object.fromEntries(Object.entries(env).filter(([name]) => name === 'APT_CONFIG' || /^(https?|no|all)_proxy$/i.test(name)))
}

/**
 * The tags of an app that apt can install: the package names apt has a version of
 * (`apt-cache search --names-only`; a name left behind by a failed install has none) that
 * read back as `localpuppet-<app>-<tag>`, newest first.
 */
export async function aptTags(app: string, options: AptOptions = {}): Promise<string[]> {
  const prefix = appPrefix(app)
  const pattern = `^${prefix.replace(/[.+]/g, '\\$&')}`
  const result = await apt('apt-cache', [...aptArgs(options), 'search', '--names-only', pattern], options)
  if (result.exitCode !== 0) throw aptFailure(`apt-cache search --names-only ${pattern}`, result)
  const names = result.stdout.split('\n').map((line) => line.split(' - ')[0].trim())
  const tags = names.map((name) => parsePackageName(name)).filter((parsed) => parsed?.app === app).map((parsed) => parsed!.tag)
  return sortTagsNewestFirst([...new Set(tags)])
}

/** The package a reference names: an exact tag, or the newest tag apt has that satisfies a range. */
export async function resolveAptRef(text: string, options: AptOptions = {}): Promise<{release: string; package: string}> {
  const ref = parseReleaseRef(text, 'fetch')
  if (ref.kind === 'trunk' || ref.kind === 'branch') {
    throw new UsageError(`${text}: apt has tags only; trunk and branches are never packaged`, [`fetch a tag (${ref.app}/tags/1.0.0) or a range (${ref.app}@^1)`])
  }

  if (ref.kind === 'channel') {
    throw new UsageError(`${text}: channels live in a release repository's index, not in apt's lists`, [`fetch a tag (${ref.app}/tags/1.0.0) or a range (${ref.app}@^1), or use a repository (--source URL)`])
  }

  const tags = await aptTags(ref.app, options)
  const tag = pickTag(ref, tags)
  if (tag === undefined) {
    const known = tags.length > 0 ? `; apt has ${tags.slice(0, 10).join(', ')}${tags.length > 10 ? ', ...' : ''}` : `; apt knows no package ${appPrefix(ref.app)}*`
    throw new NotFoundError(`${text}: no tag of ${ref.app} ${ref.kind === 'tag' ? `named ${ref.tag}` : `satisfies ${JSON.stringify(ref.range)}`} in apt's lists${known}`, [
      'apt-get update refreshes what apt knows; the package must come from `localpuppet pack --format deb`',
    ])
  }

  return {release: `${ref.app}/tags/${tag}`, package: packageName(ref.app, tag)}
}

function pickTag(ref: Extract<ReleaseRef, {kind: 'tag' | 'range'}>, tags: string[]): string | undefined {
  if (ref.kind === 'tag') return tags.includes(ref.tag) ? ref.tag : undefined
  return tags.includes(ref.range) ? ref.range : maxSatisfyingTag(tags, ref.range)
}

/**
 * Installs releases with apt: each reference resolves to a package (newest satisfying
 * tag for a range), `apt-get install -y` brings it and the packages of its modulepath
 * (its Depends) with apt's signature checks, non-interactively. Each release must then be
 * in the module directory with the package's install record, or the package was built
 * for another directory (66). Reports each release asked for as fetch does: installed
 * when apt installed it or part of its modulepath (with those packages' sizes), else
 * already present.
 */
export async function fetchWithApt(options: AptFetchOptions): Promise<AptFetchResult> {
  const moduleDir = await realModuleDir(options.moduleDir)
  const wanted: Array<{ref: string; release: string; package: string}> = []
  for (const ref of options.refs) {
    const resolved = await resolveAptRef(ref, options)
    if (!wanted.some((item) => item.release === resolved.release)) wanted.push({ref, ...resolved})
  }

  const names = wanted.map((item) => item.package)
  const before = await installedPackages(options)
  const args = [...aptArgs(options), '-o', `DPkg::Lock::Timeout=${options.lockTimeout ?? 300}`, 'install', '-y', '--no-install-recommends', ...names]
  const result = await apt('apt-get', args, {...options, env: {DEBIAN_FRONTEND: 'noninteractive', ...options.env}})
  if (result.exitCode !== 0) throw aptFailure(`apt-get install ${names.join(' ')}`, result)

  const releases: AptFetchedRelease[] = []
  for (const item of wanted) {
    // The whole modulepath: the package and its Depends, in order.
    const packages = [item.package, ...(await dependsOf(item.package, options))]
    const fresh = packages.filter((name) => !before.has(name))
    const sizes = fresh.length > 0 ? await archiveSizes(fresh, options) : new Map<string, number>()
    const modulepath: string[] = []
    for (const name of packages) {
      const parsed = parsePackageName(name)
      if (!parsed) continue
      const release = `${parsed.app}/tags/${parsed.tag}`
      const record = readRecordFields(moduleDir, release)
      if (record?.source?.type !== 'deb' || record.source.package !== name) {
        throw new NotFoundError(`${name}: installed, but ${release} is not in ${moduleDir} (the package was packed for another --node-module-dir; dpkg -L ${name} shows where)`)
      }

      modulepath.push(release)
    }

    const bytes = fresh.reduce((sum, name) => sum + (sizes.get(name) ?? 0), 0)
    releases.push({release: item.release, ref: item.ref, package: item.package, status: fresh.length > 0 ? 'installed' : 'already present', bytes, modulepath})
  }

  return {source: 'apt', releases, signedBy: null}
}

function aptArgs(options: AptOptions): string[] {
  return (options.aptOptions ?? []).flatMap((option) => ['-o', option])
}

async function apt(file: string, args: string[], options: AptOptions): Promise<Captured> {
  const result = await capture(file, args, {env: {LC_ALL: 'C', ...options.env}})
  if (result.spawnError) throw new AptError(ExitCode.unavailable, `${file}: cannot start (${result.spawnError.message}); --source apt needs apt`)
  return result
}

/** Packages installed now (dpkg's "ii"), among localpuppet's. */
async function installedPackages(options: AptOptions): Promise<Set<string>> {
  const result = await apt('dpkg-query', ['-W', '-f', '${Package}\\t${db:Status-Abbrev}\\n', `${PACKAGE_PREFIX}*`], options)
  const installed = new Set<string>()
  for (const line of result.stdout.split('\n')) {
    const [name, status] = line.split('\t')
    if (status?.startsWith('ii')) installed.add(name)
  }

  return installed
}

async function dependsOf(name: string, options: AptOptions): Promise<string[]> {
  const result = await apt('dpkg-query', ['-W', '-f', '${Depends}', name], options)
  return result.stdout
    .split(',')
    .map((item) => item.trim().split(/[\s(|]/)[0])
    .filter((item) => item !== '')
}

async function archiveSizes(names: string[], options: AptOptions): Promise<Map<string, number>> {
  const sizes = new Map<string, number>()
  const result = await apt('apt-cache', [...aptArgs(options), 'show', '--no-all-versions', ...names], options)
  let current: string | null = null
  for (const line of result.stdout.split('\n')) {
    if (line.startsWith('Package: ')) current = line.slice('Package: '.length).trim()
    else if (line.startsWith('Size: ') && current && !sizes.has(current)) sizes.set(current, Number(line.slice('Size: '.length)))
  }

  return sizes
}

/**
 * apt's message, and an exit code by what went wrong: a refused signature or hash 65, a
 * package it does not know 66, a download that failed 69, dpkg's lock or a tag conflict
 * (the package's preinst refused) 73; not root 66 (permission denied, as for files);
 * anything else apt reports 69.
 */
export function aptFailure(what: string, result: Captured): AptError {
  const output = `${result.stderr}\n${result.stdout}`
  const lines = output.split('\n').map((line) => line.trim()).filter((line) => line !== '')
  const refusal = lines.find((line) => /^localpuppet-\S+: /.test(line))
  const errors = lines.filter((line) => line.startsWith('E: '))
  const message = refusal ?? errors[0]?.slice(3) ?? lines.at(-1) ?? `exit ${result.exitCode}`
  const rest = errors.map((line) => line.slice(3)).filter((line) => line !== message)
  let code: number = ExitCode.unavailable
  if (refusal || /pre-installation script subprocess returned error/.test(output)) code = ExitCode.locked
  else if (/NO_PUBKEY|not signed|unauthenticated|signatures couldn't be verified|Hash Sum mismatch|hashes do not match|EXPKEYSIG|BADSIG/i.test(output)) code = ExitCode.invalid
  else if (/Unable to locate package|has no installation candidate/.test(output)) code = ExitCode.notFound
  else if (/are you root\?|Permission denied/.test(output)) {
    // As for any file localpuppet may not open: permission denied reads as not found (66).
    return new AptError(ExitCode.notFound, `${what}: ${message}`, ['apt installs packages as root: run localpuppet fetch as root'])
  } else if (/Could not get lock|Unable to acquire the dpkg frontend lock|Unable to lock/.test(output)) code = ExitCode.locked
  return new AptError(code, `${what}: ${message}`, rest.slice(0, 3))
}
