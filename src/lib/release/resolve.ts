import {existsSync} from 'node:fs'
import {readdir, realpath, stat} from 'node:fs/promises'
import {dirname, join, relative, sep} from 'node:path'

import {ImmutabilityError, NotFoundError, PathEscapeError, ReleaseError, UntrustedPathError, describeFsError} from '../errors.js'
import {type TreeEntry, listEntries} from '../tree/release-tree.js'
import {asIoError} from '../util/io-error.js'
import {displayPath} from '../util/shell-quote.js'
import {type TrustOptions, type TrustProblem, UNTRUSTED_TREE_HINTS, type UntrustedEntry, findTrustProblem, treeTrustProblem} from '../util/trusted-path.js'
import {type LanguageMode, languageMode} from './language-mode.js'
import {MANIFEST_FILE, readReleaseManifest} from './release-manifest.js'
import {maxSatisfyingTag, parseReleaseRef, releasePath, sortTagsNewestFirst, type ReleaseRef} from './release-ref.js'

/** One release on a resolved modulepath. */
export interface ResolvedRelease {
  /** The reference as written (`foo@^1.2`, `app/foo/trunk`). */
  ref: string
  /** The release it resolved to, relative to the module directory (`foo/tags/1.4.0`). */
  release: string
  app: string
  kind: 'trunk' | 'branch' | 'tag'
  /** Trunk, branch, or a tag chosen by a semver range: what it names can change. */
  mutable: boolean
  /** The real absolute path of the release root. */
  path: string
  /** The manifest entry that named it (`foo/tags/1.4.0/manifest.yaml:2: modulepath[0]`), or null for the app. */
  requiredBy: string | null
  /**
   * A tag whose real path is not directly under `<app>/tags/` (a link to trunk, say):
   * where it really is, relative to the module directory. Such a tag is mutable.
   */
  linkedTo?: string
}

export interface Resolution {
  /** The real path of the module directory. */
  moduleDir: string
  /** The app first, then every further release, depth first, without duplicates. */
  modulepath: ResolvedRelease[]
  /** Mutable entries that --allow-mutable let through in a tagged release. */
  mutableEntries: ResolvedRelease[]
  warnings: string[]
  /** What each release on the modulepath holds (by release), as the check of its tree listed it. */
  trees: Map<string, TreeEntry[]>
  /** With checkTrust: for each release whose tree holds files or directories another user owns or can write, one problem naming the first. */
  untrustedTrees: TrustProblem[]
  /** How the release's code compiles: what the app's manifest.yaml pins, else the defaults (a dependency's settings do not count). */
  languageMode: LanguageMode
}

export interface ResolveOptions {
  allowMutable?: boolean
  /**
   * false: only name the releases, without checking their trees (for verify, which must
   * list a link put in a tag as a modification rather than refuse to look). `trees` is
   * then empty.
   */
  checkTrees?: boolean
  /**
   * Also judge every file and directory in each tree (a stat each): Puppet, run as root,
   * reads them all. For plan and apply; see untrustedTrees.
   */
  checkTrust?: boolean
  /** With checkTrust: --allow-untrusted (a tree that cannot be listed is then refused for that, not for its trust). */
  allowUntrusted?: boolean
  /**
   * The tag each channel (`foo/channels/stable`) named when this node last read its
   * repository's index (see channel-memory): how an app on a channel resolves without a fetch.
   */
  channels?: Record<string, string>
  /**
   * Trees already listed by this process (see newTreeMemo): a caller resolving many inputs
   * against the same releases (validate) lists each release's tree once, not once per input.
   * The outcome is kept whole, a refusal included, so every input gets the same answer.
   */
  treeMemo?: TreeMemo
}

/** What listing one release's tree gave: its entries and trust problem, or what it threw. */
type TreeListing = {entries: TreeEntry[]; problem: TrustProblem | null} | {error: unknown}

/** Tree listings of one invocation, by real path, label and whether trust was judged; never kept across runs. */
export type TreeMemo = Map<string, TreeListing>

/** An empty TreeMemo, for one invocation that resolves many references. */
export function newTreeMemo(): TreeMemo {
  return new Map()
}

/**
 * Resolves a release reference and everything its manifests name into a modulepath.
 * Reads the filesystem, writes nothing. Refuses (65) cycles, paths that leave the module
 * directory, and mutable entries under a tagged release unless allowMutable; a missing
 * release or a range nothing satisfies is 66.
 */
export async function resolveRelease(moduleDir: string, ref: ReleaseRef | string, options: ResolveOptions = {}): Promise<Resolution> {
  const root = await realModuleDir(moduleDir)
  const resolver = new Resolver(root, options.checkTrust === true && !options.allowUntrusted, options.channels ?? {})
  const appRef = typeof ref === 'string' ? parseReleaseRef(ref) : ref
  const app = await resolver.resolveRef(appRef, null)
  const modulepath: ResolvedRelease[] = []
  const mutableEntries: ResolvedRelease[] = []
  const seen = new Set<string>()
  const stack: ResolvedRelease[] = []
  const immutable = app.kind === 'tag' && !app.linkedTo
  let mode: LanguageMode | undefined

  const visit = async (release: ResolvedRelease): Promise<void> => {
    const onStack = stack.findIndex((entry) => entry.path === release.path)
    if (onStack !== -1) {
      const chain = [...stack.slice(onStack), release].map((entry) => entry.release).join(' -> ')
      throw new ReleaseError(`${release.requiredBy}: ${JSON.stringify(release.ref)} makes a modulepath cycle: ${chain}`)
    }

    if (seen.has(release.path)) return
    seen.add(release.path)
    modulepath.push(release)
    if (immutable && release.mutable && release.requiredBy !== null) {
      if (!options.allowMutable) {
        throw new ImmutabilityError(
          `${release.requiredBy}: ${JSON.stringify(release.ref)} is mutable (${release.linkedTo ? `a link to ${release.linkedTo}` : release.kind === 'tag' ? 'a semver range' : release.kind}); ` +
            `a tagged release may depend only on exact tags such as ${release.app}/tags/${release.kind === 'tag' ? release.release.split('/').pop() : '1.0.0'}`,
          ['pin the dependency to an exact tag, or pass --allow-mutable to run it anyway (recorded in the run record)'],
        )
      }

      mutableEntries.push(release)
    }

    stack.push(release)
    const label = `${release.release}/${MANIFEST_FILE}`
    // What a manifest others could write says is not believed, even to report it wrong:
    // the release (from the module directory down) and its manifest.yaml are judged first.
    // (The release itself was judged when it was resolved.)
    if (existsSync(join(release.path, MANIFEST_FILE))) resolver.assertTrusted(join(release.path, MANIFEST_FILE), 'release manifest', false)

    const manifestPath = await resolver.insidePath(join(release.path, MANIFEST_FILE), label, true)
    const manifest = manifestPath === null ? {entries: [], language: {}} : await readReleaseManifest(manifestPath, label)
    mode ??= languageMode(manifest.language, label)
    for (const entry of manifest.entries) {
      const dependency = await resolver.resolveRef(parseReleaseRef(entry.text, entry.where), entry.where)
      await visit(dependency)
    }

    stack.pop()
  }

  await visit(app)
  // One rule for plan, validate, apply and pack alike: a release holds only regular files
  // and directories (a link, device or FIFO is refused here, naming it, before anything runs).
  const untrustedTrees: TrustProblem[] = []
  const trees = new Map(
    options.checkTrees === false
      ? []
      : modulepath.map((release) => {
          const listing = listedTree(release, options)
          if ('error' in listing) throw listing.error
          if (listing.problem) untrustedTrees.push(listing.problem)
          return [release.release, listing.entries]
        }),
  )
  const warnings = duplicateAppWarnings(modulepath)
  if (app.linkedTo) warnings.unshift(`${app.release} is not a real tag: it resolves to ${app.linkedTo}, which can change (a tag must be a directory under ${app.app}/tags/)`)
  return {moduleDir: root, modulepath, mutableEntries, warnings, trees, untrustedTrees, languageMode: mode!}
}

/**
 * What apply (and validate --compile, as root) judges of a modulepath besides the trees:
 * every directory from the module directory down to each release, as written (a link
 * planted in a shared tags directory) and where it really is. A fix covers the tree.
 */
export function modulepathTrustPaths(resolution: Pick<Resolution, 'moduleDir' | 'modulepath'>): Array<{path: string} & TrustOptions> {
  return resolution.modulepath.map((entry) => ({path: join(resolution.moduleDir, entry.release), what: `release ${entry.release}`, below: resolution.moduleDir, tree: true}))
}

/** The real path of the module directory; 66 when it is missing or not a directory. */
export async function realModuleDir(moduleDir: string): Promise<string> {
  let root: string
  try {
    root = await realpath(moduleDir)
  } catch (error) {
    throw describeFsError(error, `module directory ${moduleDir}`)
  }

  if (!(await stat(root)).isDirectory()) throw new NotFoundError(`module directory ${moduleDir}: not a directory`)
  if (root.includes(':')) throw new ReleaseError(`module directory ${root}: contains ':', which Puppet's modulepath cannot hold`)
  return root
}

class Resolver {
  private readonly tagCache = new Map<string, string[]>()

  /** `judge`: refuse (77) what others could change before anything in it is read (checkTrust without allowUntrusted). */
  constructor(
    private readonly root: string,
    private readonly judge = false,
    private readonly channels: Record<string, string> = {},
  ) {}

  /** With `judge`: the path as written and its real path, each from the module directory down (a link planted in a shared tags directory is caught by the first). */
  assertTrusted(path: string, what: string, tree: boolean): void {
    if (!this.judge) return
    const problem = findTrustProblem(path, {what, below: this.root, tree})
    if (problem) throw new UntrustedPathError(problem.message, [...UNTRUSTED_TREE_HINTS])
  }

  async resolveRef(ref: ReleaseRef, requiredBy: string | null): Promise<ResolvedRelease> {
    const by = requiredBy ? ` (${requiredBy})` : ''
    if (ref.kind === 'range') {
      const tags = await this.tags(ref.app, ref.text, by)
      const exact = tags.includes(ref.range)
      const tag = exact ? ref.range : maxSatisfyingTag(tags, ref.range)
      if (tag === undefined) {
        const shown = tags.length > 0 ? `; tags: ${sortTagsNewestFirst(tags).slice(0, 10).map(displayPath).join(', ')}${tags.length > 10 ? ', ...' : ''}` : ''
        throw new NotFoundError(`release ${ref.text}${by}: no tag of ${ref.app} satisfies ${JSON.stringify(ref.range)}${shown}`)
      }

      return this.release(ref.text, {app: ref.app, kind: 'tag', tag}, !exact, requiredBy)
    }

    if (ref.kind === 'channel') {
      // A channel names a tag only in a repository's index: a manifest cannot depend on one.
      if (requiredBy !== null) throw new ReleaseError(`${requiredBy}: ${JSON.stringify(ref.text)} is a channel; a release's modulepath names tags`)
      const tag = this.channels[`${ref.app}/channels/${ref.channel}`]
      if (tag === undefined) {
        throw new NotFoundError(`release ${ref.text}: this node has not read channel ${ref.channel} of ${ref.app} from a repository yet`, [
          `fetch it first: localpuppet apply --fetch (or localpuppet fetch ${ref.text}); validate: --repo DIR resolves it through a repository`,
        ])
      }

      // The tag the channel named: the run applies exactly it, as immutable as any tag.
      return this.release(ref.text, {app: ref.app, kind: 'tag', tag}, false, requiredBy)
    }

    return this.release(ref.text, ref, ref.kind !== 'tag', requiredBy)
  }

  /**
   * The real path of `path` if it exists and stays inside the module directory; with
   * `optional`, null when it does not exist.
   */
  async insidePath(path: string, label: string, optional = false): Promise<string | null> {
    let real: string
    try {
      real = await realpath(path)
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code
      if (optional && (code === 'ENOENT' || code === 'ENOTDIR')) return null
      throw describeFsError(error, label)
    }

    if (real !== this.root && !real.startsWith(this.root + sep)) {
      throw new PathEscapeError(`${label}: resolves to ${real}, outside the module directory ${this.root}`)
    }

    if (real.includes(':')) throw new ReleaseError(`${label}: path ${real} contains ':', which Puppet's modulepath cannot hold`)
    return real
  }

  private async release(
    text: string,
    ref: {app: string; kind: 'trunk' | 'branch' | 'tag'; tag?: string; branch?: string},
    mutable: boolean,
    requiredBy: string | null,
  ): Promise<ResolvedRelease> {
    const release = releasePath(ref)
    const by = requiredBy ? ` (${requiredBy})` : ''
    const path = await this.insidePath(join(this.root, release), `release ${release}${by}`, true)
    if (path === null) {
      const suggestions = await this.suggest(ref.app)
      throw new NotFoundError(`release ${text}${by}: ${release} not found in ${this.root}`, suggestions)
    }

    this.assertTrusted(join(this.root, release), `release ${release}`, true)
    const info = await stat(path).catch((error: unknown) => {
      throw asIoError(error, `release ${release}${by}`) ?? describeFsError(error, `release ${release}${by}`)
    })
    if (!info.isDirectory()) throw new ReleaseError(`release ${release}${by}: not a directory`)
    const resolved: ResolvedRelease = {ref: text, release, app: ref.app, kind: ref.kind, mutable, path, requiredBy}
    if (ref.kind === 'tag') {
      // A tag is immutable only where tags live: a link to trunk would change under it.
      const tagsDir = await realpath(join(this.root, ref.app, 'tags')).catch(() => null)
      if (tagsDir === null || dirname(path) !== tagsDir) {
        resolved.mutable = true
        resolved.linkedTo = relative(this.root, path) || '.'
      }
    }

    return resolved
  }

  private async tags(app: string, text: string, by: string): Promise<string[]> {
    const cached = this.tagCache.get(app)
    if (cached) return cached
    const dir = await this.insidePath(join(this.root, app, 'tags'), `release ${text}${by}`, true)
    if (dir === null) throw new NotFoundError(`release ${text}${by}: ${app} has no tags in ${this.root}`, await this.suggest(app))
    this.assertTrusted(join(this.root, app, 'tags'), `${app}/tags directory`, false)
    const entries = await readdir(dir, {withFileTypes: true}).catch((error: unknown) => {
      throw asIoError(error, `${app}/tags`) ?? describeFsError(error, `release ${text}${by}: ${app}/tags`)
    })
    const tags = entries.filter((entry) => entry.isDirectory() || entry.isSymbolicLink()).map((entry) => entry.name)
    this.tagCache.set(app, tags)
    return tags
  }

  private async suggest(app: string): Promise<string[]> {
    try {
      const tags = await readdir(join(this.root, app, 'tags'))
      if (tags.length > 0) return [`${app} has tags: ${sortTagsNewestFirst(tags).slice(0, 10).map(displayPath).join(', ')}`]
    } catch {
      // Only a hint: no tags to suggest.
    }

    try {
      const apps = (await readdir(this.root, {withFileTypes: true})).filter((entry) => entry.isDirectory()).map((entry) => entry.name)
      if (!apps.includes(app) && apps.length > 0) return [`apps in ${this.root}: ${apps.sort().slice(0, 20).map(displayPath).join(', ')}`]
    } catch {
      // Only a hint: no apps to suggest.
    }

    return []
  }
}

/** A release's tree as listTree gives it, from the memo when this invocation listed it already. */
function listedTree(release: ResolvedRelease, options: ResolveOptions): TreeListing {
  const key = `${release.path}\0${release.release}\0${options.checkTrust === true}\0${options.allowUntrusted === true}`
  let listing = options.treeMemo?.get(key)
  if (listing === undefined) {
    listing = listTree(release, options)
    options.treeMemo?.set(key, listing)
  }

  return listing
}

/** Lists a release's tree (and, with checkTrust, what in it others own or can write); a refusal is returned, not thrown. */
function listTree(release: ResolvedRelease, options: ResolveOptions): TreeListing {
  const untrusted: UntrustedEntry[] | undefined = options.checkTrust ? [] : undefined
  const problem = () => (untrusted && treeTrustProblem(release.path, `release ${release.release}`, untrusted)) || null
  let entries: TreeEntry[]
  try {
    entries = listEntries(release.path, release.release, untrusted)
  } catch (error) {
    // A tree others can write that also holds a link, or changes while it is read: the trust is what is wrong.
    const found = problem()
    if (found && !options.allowUntrusted) return {error: new UntrustedPathError(found.message, [...UNTRUSTED_TREE_HINTS])}
    return {error}
  }

  return {entries, problem: problem()}
}

function duplicateAppWarnings(modulepath: ResolvedRelease[]): string[] {
  const byApp = new Map<string, ResolvedRelease[]>()
  for (const entry of modulepath) byApp.set(entry.app, [...(byApp.get(entry.app) ?? []), entry])
  return [...byApp.values()]
    .filter((entries) => entries.length > 1)
    .map((entries) => `${entries.map((entry) => entry.release).join(' and ')} are both on the modulepath; Puppet loads each module from the first that has it`)
}
