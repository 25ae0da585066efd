import {createReadStream} from 'node:fs'
import {mkdir, mkdtemp, readFile, stat, writeFile} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {dirname, join} from 'node:path'

import {InputError, NotFoundError, PuppetUnavailableError, ReleaseError, describeFsError} from '../errors.js'
import {installArchive} from '../install/install-archive.js'
import {type CheckedNodeInput, assertResolvable} from '../repository/publish-inputs.js'
import {type PublishedTag, type RepositoryIndex, indexChannels, tagInIndex} from '../repository/repository-index.js'
import {removeTree} from '../util/remove-tree.js'
import {validateInputs} from '../validate/validate-inputs.js'

/** An archive given to this publish (not yet in the index): where it is, and the tag it adds. */
export interface GivenArchive {
  source: string
  app: string
  tagName: string
  tag: PublishedTag
}

export interface PublishCheckOptions {
  /** The repository (absolute). */
  repo: string
  /** The index as read under the repository's lock. */
  index: RepositoryIndex
  /** The archives this publish adds (their tags count as published; their files are read from where they were given). */
  archives: GivenArchive[]
  inputs: CheckedNodeInput[]
  /** The puppet executable for validate's syntax and variable checks; null skips them (as validate --puppet none). */
  puppet: string | null
  /** The layers this publish adds (--layers DIR): with the repository's own, what a layered input merges. */
  layers?: Array<{name: string; bytes: Buffer}>
}

/**
 * One problem, as validate reports it: of one input (its file and line), or of the release
 * several inputs resolve to (a manifest's syntax, a variable nobody sets), said once for
 * all of them: `nodes` lists them, `file` and `line` are the first one's.
 */
export interface RefusedInputProblem {
  node: string
  nodes: string[]
  file: string
  line: number | null
  /** The line shown: the input's file first. */
  message: string
}

/**
 * Node inputs publish refuses (65): every problem of every input, one line each, so the
 * operator fixes them all in one go. Nothing is published.
 */
export class RefusedInputsError extends InputError {
  readonly problems: RefusedInputProblem[]

  constructor(problems: RefusedInputProblem[], inputs: number) {
    const nodes = new Set(problems.flatMap((problem) => problem.nodes)).size
    super(`${nodes} of ${inputs} node input${inputs === 1 ? '' : 's'} refused (${problems.length} problem${problems.length === 1 ? '' : 's'}: what the node would refuse or Puppet would fail on); nothing published`, [
      'fix the inputs listed and publish again; localpuppet validate --repo DIR lists the same against installed releases',
    ])
    this.problems = problems
  }

  override toJSON(): ReturnType<InputError['toJSON']> & {problems: RefusedInputProblem[]} {
    return {...super.toJSON(), problems: this.problems}
  }
}

/**
 * Validates each node input publish is about to write against the release its `app`
 * resolves to in this repository (a tag it lists or this publish adds, a range's newest
 * match, a channel's tag), exactly as `validate` judges it: classes, class parameters,
 * required parameters, values of the wrong type, the release's language mode, undefined
 * variables and syntax (those two need `puppet`). Each release is installed once from its
 * archive into a scratch module directory (the one given to this publish, else the
 * repository's copy, which must be the bytes the index lists) and every input shares it,
 * so 1,000 inputs cost about one release read plus a little each. The bytes checked are
 * the bytes published. Throws, before anything is written: 66 for an app the repository
 * cannot resolve or an archive missing from it, 65 for an archive that is not what the
 * index lists and for the inputs refused (RefusedInputsError), 69 when puppet cannot run.
 */
export async function validatePublishedInputs(options: PublishCheckOptions): Promise<void> {
  const {repo, inputs} = options
  if (inputs.length === 0) return
  const view = withArchives(options.index, options.archives)
  for (const input of inputs) assertResolvable(view, input)
  const scratch = await mkdtemp(join(tmpdir(), 'localpuppet-publish-check-'))
  try {
    const moduleDir = join(scratch, 'modules')
    await mkdir(moduleDir)
    const installed = new Set<string>()
    const files = new Map<string, CheckedNodeInput>()
    for (const input of inputs) {
      const ref = input.ref as Parameters<typeof tagInIndex>[1]
      const tagName = tagInIndex(view, ref)!
      const release = `${ref.app}/tags/${tagName}`
      if (!installed.has(release)) {
        installed.add(release)
        await installRelease(repo, options.archives, view.apps[ref.app].tags[tagName], {app: ref.app, tagName, release, node: input.node}, moduleDir)
      }

      files.set(input.file, input)
    }

    // A layered input merges the layers the repository holds, and this publish adds, as a node would: in a scratch directory.
    const layersDir = join(scratch, 'layers')
    await writeLayers(repo, options.index, options.layers ?? [], layersDir)

    const report = await validateInputs([...files.keys()], {
      // The bytes publish holds and publishes, not the operator's file read again.
      texts: new Map(inputs.map((input) => [input.file, input.bytes.toString('utf8')])),
      moduleDir,
      puppet: options.puppet,
      // The release's own language mode: a node's puppet_args are not the publisher's to know.
      puppetArgs: [],
      // The node's main manifest is not the publisher's /etc/puppet/manifests/default.pp.
      defaultManifest: join(scratch, 'no-main-manifest.pp'),
      channels: indexChannels(view),
      layersDir,
    })
    if (report.puppetUnavailable !== null) {
      throw new PuppetUnavailableError(`${report.puppetUnavailable}: publish checks node inputs with it (syntax, undefined variables); nothing published`, [
        'install puppet on this machine, or pass --puppet none to publish with the checks that need no Puppet',
      ])
    }

    const problems: RefusedInputProblem[] = []
    const ofRelease = new Map<string, RefusedInputProblem>()
    for (const checked of report.inputs) {
      const input = files.get(checked.file)!
      for (const problem of checked.problems) {
        // The release's files relative to the module directory, as the operator knows them.
        const message = problem.message.replaceAll(`${moduleDir}/`, '')
        if (message.startsWith(input.file)) {
          problems.push({node: input.node, nodes: [input.node], file: input.file, line: problem.file === checked.file ? problem.line : null, message})
          continue
        }

        const same = ofRelease.get(message)
        if (same) {
          same.nodes.push(input.node)
          continue
        }

        const found: RefusedInputProblem = {node: input.node, nodes: [input.node], file: input.file, line: null, message}
        ofRelease.set(message, found)
        problems.push(found)
      }
    }

    for (const problem of ofRelease.values()) {
      const others = problem.nodes.length - 1
      problem.message = `${problem.file}${others > 0 ? ` (and ${others} other input${others === 1 ? '' : 's'})` : ''}: ${problem.message}`
    }

    if (problems.length > 0) throw new RefusedInputsError(problems, inputs.length)
  } finally {
    await removeTree(scratch)
  }
}

/** The index as it will be once this publish's archives are in it (a copy: the index itself is left alone). */
function withArchives(index: RepositoryIndex, archives: GivenArchive[]): RepositoryIndex {
  const apps: RepositoryIndex['apps'] = {}
  for (const [app, entry] of Object.entries(index.apps)) apps[app] = {...entry, tags: {...entry.tags}}
  for (const {app, tagName, tag} of archives) {
    apps[app] ??= {tags: {}}
    apps[app].tags[tagName] ??= tag
  }

  return {...index, apps}
}

/**
 * Installs one published tag (and the releases its archive carries) into the scratch
 * module directory: from the archive given to this publish when there is one, else from
 * the repository's copy, which must be there (66) and be the bytes the index lists (65).
 */
async function installRelease(repo: string, archives: GivenArchive[], tag: PublishedTag, wanted: {app: string; tagName: string; release: string; node: string}, moduleDir: string): Promise<void> {
  const given = archives.find((archive) => archive.app === wanted.app && archive.tagName === wanted.tagName)
  const source = given?.source ?? join(repo, tag.archive)
  const why = `${wanted.release}, which node ${wanted.node}'s input resolves to`
  const repair = [`publish ${wanted.release}'s archive again: it repairs the repository's copy`]
  if (!given) {
    const info = await stat(source).catch((error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT') throw new NotFoundError(`${source}: missing from the repository (${why}): its input cannot be checked; nothing published`, repair)
      throw describeFsError(error, `${source} (${why})`)
    })
    if (!info.isFile() || info.size !== tag.size) throw new ReleaseError(`${source}: not what the repository's index lists (${why}: ${tag.size} bytes, got ${info.size}); nothing published`, repair)
  }

  const {sha256} = await installArchive(createReadStream(source, {highWaterMark: 1024 * 1024}), source, {moduleDir, trust: [], trustDir: null}).catch((error: unknown) => {
    // The repository's copy, unreadable as an archive: the index lists other bytes (publish wrote them whole).
    if (given || !(error instanceof ReleaseError)) throw error
    throw new ReleaseError(`${error.message} (${why}; not what the repository's index lists); nothing published`, repair)
  })
  if (!given && sha256 !== tag.sha256) throw new ReleaseError(`${source}: not what the repository's index lists (${why}: sha256 ${tag.sha256}, got ${sha256}); nothing published`, repair)
}

/** The repository's layers, then this publish's (which win), as `NAME.yaml` under `dir`: what validate merges layered inputs with. */
async function writeLayers(repo: string, index: RepositoryIndex, given: Array<{name: string; bytes: Buffer}>, dir: string): Promise<void> {
  const layers = new Map<string, () => Promise<Buffer>>()
  for (const [name, entry] of Object.entries(index.layers ?? {})) layers.set(name, async () => readFile(join(repo, entry.layer)))
  for (const layer of given) layers.set(layer.name, async () => layer.bytes)
  await mkdir(dir, {recursive: true})
  for (const [name, bytes] of layers) {
    const file = join(dir, `${name}.yaml`)
    await mkdir(dirname(file), {recursive: true})
    await writeFile(file, await bytes().catch(() => Buffer.alloc(0)))
  }
}
