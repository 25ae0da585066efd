import {randomBytes} from 'node:crypto'
import {createReadStream} from 'node:fs'
import {copyFile, mkdir, mkdtemp, open, rename, rm, stat, unlink} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {basename, dirname, join, resolve} from 'node:path'

import {installArchive} from '../install/install-archive.js'
import {loadSigningKey} from '../archive/signature.js'
import {nodesForSealCheck} from './node-documents/node-table.js'
import {ConflictError, ReleaseError, UsageError, describeFsError} from '../errors.js'
import type {IndexSummary} from '../archive/release-index.js'
import {readArchiveHead} from './archive-head.js'
import {type IndexUpdate, hasIndex, updateIndex} from './index-update.js'
import {type NodeInputFile, type PublishedNodeInput, addNodeInputs, assertNodeInputSizes, checkNodeInputs} from './publish-inputs.js'
import {assertNoStrayInputs, nodesToPrune, pruneIndex} from './prune-inputs.js'
import {type PublishedTag, REPOSITORY_INDEX, archivePathFor} from './repository-index.js'
import {type PublishedLayerResult, addLayers, assertInputLayersPublished, checkLayersDir, computeNodeInputs} from '../layers/published-layers.js'
import {checkStoredCopy} from './stored-copy.js'
import {own} from '../util/own.js'
import {type SealOptions, assertNoPlainAmongSealed, refuseLayerSecrets, sealNodeDocuments} from '../secrets/seal-inputs.js'
import {marksSecrets} from '../secrets/secret-values.js'
import {removeTree} from '../util/remove-tree.js'

export interface PublishOptions {
  repo: string
  archives: string[]
  /** --node NAME --input FILE, --inputs DIR: node inputs to publish (after the archives, from the same index). */
  nodes?: NodeInputFile[]
  /** --layers DIR: the layers node inputs name (see layers/). */
  layers?: string
  /** --computed: publish each node's input with its layers merged in (layers/computed-input.ts), and no layer. */
  computed?: boolean
  /** --sign: an Ed25519 private key (PEM) that signs index.json. */
  signingKey?: string
  /** How long to wait for another publisher's lock, in ms. */
  lockWaitMs?: number
  /** --expires: how long the new index is valid, in ms (DEFAULT_INDEX_EXPIRY_MS when absent). */
  expiresInMs?: number
  /** The clock (tests). */
  now?: () => number
  /** Encryption of node inputs to their nodes' recipients (NAME.pub beside each input), operator recipients, --allow-plain-input. */
  seal?: SealOptions
  /** The puppet executable validate's syntax and variable checks of node inputs use; null or absent: the checks that need no Puppet only. */
  puppet?: string | null
  /** --prune (with --inputs DIR, `pruneFrom`): the inputs of nodes not among `nodes` leave the index and the repository. */
  prune?: boolean
  pruneFrom?: string
  /** --node-documents-only: index.json lists no nodes from now on, each node's entry is in its document (node-documents/); kept by later publishes. */
  nodeDocumentsOnly?: boolean
}

export interface PublishedEntry {
  release: string
  archive: string
  size: number
  sha256: string
  /** repaired: already published, but the repository's copy was missing or changed, so it was written again (the index entry kept). */
  status: 'added' | 'unchanged' | 'repaired'
}

export interface PublishResult extends IndexUpdate {
  repo: string
  releases: PublishedEntry[]
  /** The node inputs published (empty without --node/--inputs). */
  nodes: PublishedNodeInput[]
  /** What --layers published. */
  layers: PublishedLayerResult[]
  /** The nodes whose inputs --prune removed (empty without it). */
  pruned: string[]
}

/**
 * Adds archives made by `pack` (and node inputs) to a release repository: a directory any
 * static web server can serve. Every archive is verified in full and every input validated
 * first. Under the repository's lock (updateIndex), each tag is checked against the index
 * just read (the same content is a no-op; other content is a ConflictError, 73, and nothing
 * changes), the archives are copied in (temp file, fsync, rename), then the inputs, and the
 * index is replaced last, with the next version and a new expiry, even when nothing is new
 * (a re-signing). A tag already published is checked on disk too: a stored archive that is
 * missing or no longer the bytes its index entry lists (which nodes refuse) is written again
 * from the archive given when that is those bytes, the entry left as it is; another copy of
 * the same content cannot stand in for it (73: its signature or size would differ from the
 * entry nodes check), and nothing changes.
 */
export async function publishArchives(options: PublishOptions): Promise<PublishResult> {
  const repo = resolve(options.repo)
  const now = options.now ?? Date.now
  // Nothing to add and nothing to re-sign: most likely a mistyped --repo, which would otherwise become an empty repository.
  if (options.archives.length === 0 && (options.nodes ?? []).length === 0 && !options.layers && !(await hasIndex(repo))) {
    throw new UsageError(`nothing to publish: no archives given, and ${repo} has no ${REPOSITORY_INDEX} to re-sign`, ['give the archives made by localpuppet pack'])
  }

  const key = options.signingKey ? await loadSigningKey(options.signingKey) : null
  const candidates: Candidate[] = []
  try {
    for (const archive of options.archives) candidates.push(await inspectArchive(archive))
    return await publishInspected(options, repo, now, key, candidates)
  } finally {
    for (const candidate of candidates) await removeTree(candidate.installed.dir)
  }
}

/** publishArchives once every archive was proved whole. */
async function publishInspected(options: PublishOptions, repo: string, now: () => number, key: Awaited<ReturnType<typeof loadSigningKey>> | null, candidates: Candidate[]): Promise<PublishResult> {
  const checked = await checkNodeInputs(options.nodes ?? [])
  // With --computed, what a node receives is its document with its layers merged in: that is what is validated and sealed.
  const plainInputs = options.computed ? await computeNodeInputs(checked, options.layers) : checked
  const inputs = await sealNodeDocuments(plainInputs, options.seal ?? {}, (input) => marksSecrets(input.bytes, input.file))
  assertNodeInputSizes(inputs)
  // A layer is published in clear (or merged into documents stored for many nodes): no secret may be in one.
  const given = options.layers ? await checkLayersDir(options.layers) : []
  refuseLayerSecrets(given)
  const layers = options.computed ? [] : given
  const seen = new Map<string, string>()
  for (const candidate of candidates) {
    const other = seen.get(candidate.release)
    if (other !== undefined && other !== candidate.tag.sha256) throw new ConflictError(`${candidate.release}: two different archives given for the same tag`)
    seen.set(candidate.release, candidate.tag.sha256)
  }

  let pruned: string[] = []
  const afterIndex = async () => {
    for (const node of pruned) await rm(join(repo, 'inputs', node), {recursive: true, force: true})
  }
  const resign = options.archives.length === 0 && (options.nodes ?? []).length === 0 && options.layers === undefined && options.prune !== true
  const updated = await updateIndex({repo, key, lockWaitMs: options.lockWaitMs, expiresInMs: options.expiresInMs, now, afterIndex, resign}, async (index) => {
    // Decided and checked before anything is written: a refused prune or input publishes nothing.
    if (options.prune) pruned = nodesToPrune(index, inputs.map((input) => input.node), options.pruneFrom ?? 'the inputs given')
    if (options.pruneFrom !== undefined) await assertNoStrayInputs(options.pruneFrom, pruned)
    // The layers inputs name, in the repository or this publish, before their documents are judged.
    assertInputLayersPublished(plainInputs, {layers: {...index.layers, ...Object.fromEntries(layers.map((layer) => [layer.name, layer]))}} as Parameters<typeof assertInputLayersPublished>[1])
    if (inputs.length > 0) await (await import('../publish-check/validate-published.js')).validatePublishedInputs({repo, index, archives: candidates, inputs: plainInputs, puppet: options.puppet ?? null, layers})
    const releases: PublishedEntry[] = []
    const toAdd: typeof candidates = []
    const toRepair: typeof candidates = []
    for (const candidate of candidates) {
      const existing = own(own(index.apps, candidate.app)?.tags, candidate.tagName)
      const entry = {release: candidate.release, archive: candidate.tag.archive, size: candidate.tag.size, sha256: candidate.tag.sha256}
      if (existing) {
        if (!sameContent(existing, candidate.tag)) {
          throw new ConflictError(`${candidate.release} is already published with other content (${existing.digest}; this archive: ${candidate.tag.digest})`, [
            'tags are immutable: publish a new tag',
          ])
        }

        const stored = toRepair.some((other) => other.release === candidate.release) ? 'changed' : await checkStoredCopy(join(repo, existing.archive), existing)
        if (stored !== 'intact') {
          if (candidate.tag.sha256 !== existing.sha256) {
            throw new ConflictError(
              `${candidate.release}: the repository's ${existing.archive} is ${stored === 'missing' ? 'missing' : 'not what its index lists (another size or sha256)'}, and this archive is another copy of the same content ` +
                `(sha256 ${candidate.tag.sha256}; the index lists ${existing.sha256}${existing.signedBy ? `, signed by ${existing.signedBy}` : ''}): it cannot repair it`,
              ['publish the archive the index lists to write it again: pack the same tag again with the same key (pack gives the same bytes for the same tree)'],
            )
          }

          if (!toRepair.some((other) => other.release === candidate.release)) toRepair.push({...candidate, tag: existing})
        }

        releases.push({...entry, archive: existing.archive, size: existing.size, sha256: existing.sha256, status: stored === 'intact' ? 'unchanged' : 'repaired'})
        continue
      }

      if (!toAdd.some((other) => other.release === candidate.release)) toAdd.push(candidate)
      releases.push({...entry, status: 'added'})
    }

    // The index entry of a repaired archive stays as it is: the bytes written are the ones it lists.
    for (const candidate of toRepair) await copyInto(candidate.source, join(repo, candidate.tag.archive))
    for (const candidate of toAdd) {
      // Its objects (delta/publish-objects.ts: what lets a node download only what changed), then its archive.
      const {writeTagObjects} = await import('../delta/publish-objects.js')
      const {manifest, size} = await writeTagObjects(repo, candidate.installed.dir, candidate.installed.index)
      candidate.tag.objects = {manifest, size}
      await copyInto(candidate.source, join(repo, candidate.tag.archive))
      if (!Object.hasOwn(index.apps, candidate.app)) index.apps[candidate.app] = {tags: {}}
      index.apps[candidate.app].tags[candidate.tagName] = candidate.tag
    }

    const published = await addLayers(repo, index, layers, now)
    assertInputLayersPublished(plainInputs, index)
    assertNoPlainAmongSealed(inputs, nodesForSealCheck(index), options.seal ?? {})
    const nodes = await addNodeInputs(repo, index, inputs, now)
    pruneIndex(index, pruned)
    if (options.nodeDocumentsOnly) index.nodesInDocuments = true
    return {releases, nodes, layers: published, pruned}
  })
  return {repo, ...updated}
}

/** An archive given to publish, proved whole: installed in a scratch directory. */
interface Candidate {
  source: string
  tag: PublishedTag
  release: string
  app: string
  tagName: string
  installed: {dir: string; index: IndexSummary}
}

/** Same content: the same releases with the same digests (a re-pack, or a signed copy, of the same tree). */
function sameContent(a: PublishedTag, b: PublishedTag): boolean {
  return a.modulepath.length === b.modulepath.length && a.modulepath.every((release, i) => release === b.modulepath[i] && a.digests[release] === b.digests[release])
}

/**
 * Reads the archive's release.json and verifies every entry of it by installing into a
 * throwaway directory (`installed`, removed by the caller), from which a tag added writes
 * its content-addressed objects.
 */
async function inspectArchive(path: string): Promise<Candidate> {
  const source = resolve(path)
  let size: number
  try {
    const info = await stat(source)
    if (!info.isFile()) throw new UsageError(`archive ${path}: not a file`)
    size = info.size
  } catch (error) {
    if (error instanceof UsageError) throw error
    throw describeFsError(error, `archive ${path}`)
  }

  const {index, signedBy} = await readArchiveHead(source, path)
  if (index.tag === null) throw new ReleaseError(`${path}: ${index.release} is mutable; repositories hold tags only`, ['pack a tag'])
  const mutable = index.modulepath.find((release) => !release.includes('/tags/'))
  if (mutable) throw new ReleaseError(`${path}: ${index.release} carries mutable ${mutable}; repositories hold tags only`)
  const scratch = await mkdtemp(join(tmpdir(), 'localpuppet-publish-'))
  let sha256: string
  try {
    // The install that proves the archive whole also hashes it: the archive is read once.
    ;({sha256} = await installArchive(createReadStream(source, {highWaterMark: 1024 * 1024}), path, {moduleDir: scratch, trust: [], trustDir: null}))
  } catch (error) {
    await removeTree(scratch)
    throw error
  }

  const tag: PublishedTag = {
    archive: archivePathFor(index.app, index.tag),
    size,
    sha256,
    digest: index.releases[0].digest,
    modulepath: index.modulepath,
    digests: Object.fromEntries(index.releases.map((r) => [r.release, r.digest])),
    signedBy,
    publishedAt: new Date().toISOString(),
  }
  return {source, tag, release: index.release, app: index.app, tagName: index.tag, installed: {dir: scratch, index}}
}

/** Copies an archive into the repository: temp file, fsync, rename; 0644 so a web server can read it. */
async function copyInto(source: string, target: string): Promise<void> {
  await mkdir(dirname(target), {recursive: true, mode: 0o755})
  const temp = join(dirname(target), `.${basename(target)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`)
  try {
    await copyFile(source, temp)
    const handle = await open(temp, 'r+')
    try {
      await handle.chmod(0o644)
      await handle.sync()
    } finally {
      await handle.close()
    }

    await rename(temp, target)
  } catch (error) {
    await unlink(temp).catch(() => {})
    throw error
  }
}
