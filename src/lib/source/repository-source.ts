import {createReadStream} from 'node:fs'
import {lstat, mkdir, rm} from 'node:fs/promises'
import {join} from 'node:path'
import {createHash} from 'node:crypto'

import {downloadPath, downloadsDir, removeAbandonedDownloads} from '../install/downloads.js'
import type {InstallResult} from '../install/install-archive.js'
import {localpuppetDir, readRecordHead} from '../install/install-record.js'
import {loadTrustedKeys, verifyIndexSignature} from '../archive/signature.js'
import {ConflictError, InputError, NotFoundError, ReleaseError, RepositoryUnavailableError, UsageError, describeFsError} from '../errors.js'
import {type ReleaseRef, parseReleaseRef, sortTagsNewestFirst} from '../release/release-ref.js'
import {decodeUtf8Strict} from '../util/bounded-read.js'
import {own} from '../util/own.js'
import {UNSIGNED_HINT, refuseUnlessAllowed} from '../util/trusted-path.js'
import {
  type PublishedTag,
  type RepositoryIndex,
  MAX_NODE_INPUT_BYTES,
  MAX_REPOSITORY_INDEX_BYTES,
  REPOSITORY_INDEX,
  REPOSITORY_SIGNATURE,
  indexChannels,
  parseRepositoryIndex,
  tagInIndex,
} from '../repository/repository-index.js'
import {describeYank} from '../repository/channel-records.js'
import type {FetchOptions, FetchResult, FetchedRelease, IndexRead, NodeInputFetch, ReleaseSource} from './release-source.js'
import type {Transport, Validators} from './readers/reader.js'
import type {KeptIndex} from '../conditional/kept-index.js'

/** A release repository (index.json plus archives) read through a transport. */
export class RepositorySource implements ReleaseSource {
  readonly label: string

  constructor(private readonly transport: Transport) {
    this.label = transport.label
  }

  async close(): Promise<void> {
    await (this.transport as {close?: () => Promise<void>}).close?.()
  }

  /**
   * Resolves each reference against the repository's tags and installs what the module
   * directory does not already have: the download is checked against the index (size,
   * sha256), its release.json against the index entry, then installed by the usual
   * verified, atomic install (with the archive's signature checked when keys are trusted).
   */
  async fetch(refs: string[], options: FetchOptions): Promise<FetchResult> {
    const {index, signedBy, accepted, untrusted: before} = await this.acceptedIndex(options)
    const untrusted = [...before]
    const wanted = refs.map((text) => this.resolve(index, parseReleaseRef(text, 'fetch')))
    const releases: FetchedRelease[] = []
    const warnings: string[] = []
    // Downloads of fetches that were killed would otherwise stay for ever (a fetch its unit's timeout kills, again and again, fills the disk).
    await removeAbandonedDownloads(options.moduleDir)
    for (const {ref, app, tag} of wanted) {
      const release = `${app}/tags/${tag}`
      if (releases.some((r) => r.release === release)) continue
      const published = index.apps[app].tags[tag]
      if (await this.isPresent(options.moduleDir, published)) {
        releases.push({release, ref, status: 'already present', bytes: 0, modulepath: published.modulepath})
        // A yanked tag this node has is kept (it runs what it has); it is never newly installed.
        if (published.yanked) warnings.push(`${describeYank(app, tag, published.yanked)}; kept, as it is installed here, but no node takes it anew`)
        continue
      }

      if (published.yanked) {
        throw new NotFoundError(`${ref === release ? '' : `${ref}: `}${describeYank(app, tag, published.yanked)} in the repository ${this.label}: not installed`, [
          'a yanked tag is never newly installed: point the input at another tag, a range or a channel',
        ])
      }

      const installed = await this.install(release, published, options, signedBy)
      untrusted.push(...installed.untrusted.filter((problem) => !untrusted.includes(problem)))
      // Tags put there by hand (no install record) with the same content are left as they are.
      const status = installed.installed.length + installed.replaced.length > 0 ? 'installed' : 'already present'
      releases.push({release, ref, status, bytes: installed.bytes, modulepath: published.modulepath, delivery: installed.delivery, files: installed.files})
    }

    // A channel that moved is remembered only once its tag is here (see acceptIndex): now it is.
    if (releases.some((r) => r.status === 'installed')) {
      const {rememberInstalledChannels} = await import('./accepted-versions.js')
      await rememberInstalledChannels(options.moduleDir, this.track ?? this.label, index, indexChannels(index), {allowUntrusted: options.allowUntrusted})
    }

    return {
      source: this.label,
      releases,
      signedBy,
      repository: accepted.repository,
      // What was read is named as such: a node's document has its own versions (a time in milliseconds), not the index's.
      ...(this.track === undefined ? {indexVersion: accepted.version, indexExpires: accepted.expires} : {nodeDocument: {version: accepted.version, expires: accepted.expires}}),
      ...(this.transport.readConditional ? {indexUnchanged: this.indexUnchanged} : {}),
      ...(this.transport.bytesRead === undefined ? {} : {bytesRead: this.transport.bytesRead}),
      untrusted,
      warnings: [...(accepted.warning ? [accepted.warning] : []), ...warnings],
    }
  }

  /**
   * A node's own input, as the signed index lists it (`publish --node`): downloaded, its
   * size and sha256 checked against the index (65 on any difference: nothing is kept), so
   * neither a mirror nor anyone on the path can give a node another input or another
   * node's. 66 when the index lists no input for the node.
   */
  async nodeInput(node: string, options: FetchOptions, have?: Buffer | null): Promise<NodeInputFetch> {
    // Named before the first read: the node reads its own document, when the repository has one.
    this.node ??= node
    const {index, signedBy, accepted} = await this.acceptedIndex(options)
    const published = own(index.nodes, node)
    if (published === undefined) {
      // No near name is offered: another node's input would apply that node's configuration here.
      const listed = Object.keys(index.nodes ?? {}).length
      const {configPath} = await import('../config/settings.js')
      throw new NotFoundError(`node ${node} has no input in the repository ${this.label}${listed === 0 ? '; it lists no node inputs' : ''}`, [
        `publish one: localpuppet publish --node ${node} --input FILE --repo DIR; or set node_name in ${configPath().path}`,
      ])
    }

    const where = this.transport.locate(published.input)
    // The node already holds these bytes (its kept input): the signed index vouches for them, nothing to download.
    if (have && have.length === published.size && createHash('sha256').update(have).digest('hex') === published.sha256) {
      return {node, text: nodeInputText(have, where, node), bytes: have, sha256: published.sha256, location: where, published, source: this.label, signedBy, indexVersion: accepted.version, indexExpires: accepted.expires}
    }

    const bytes = await this.transport.read(published.input, MAX_NODE_INPUT_BYTES)
    if (bytes === null) throw new RepositoryUnavailableError(`${where}: not found, though the index lists it for node ${node}`, ['the repository may be mid-publish or incomplete: try again'])
    const sha256 = createHash('sha256').update(bytes).digest('hex')
    if (bytes.length !== published.size || sha256 !== published.sha256) {
      throw new ReleaseError(`${where}: input of node ${node} does not match the signed index (sha256 ${sha256}, ${bytes.length} bytes; the index says ${published.sha256}, ${published.size} bytes); refused`, [
        `someone changed it after publishing, or a mirror serves another copy: publishing the same input again repairs it (localpuppet publish --node ${node} --input FILE --repo DIR)`,
      ])
    }

    return {node, text: nodeInputText(bytes, where, node), bytes, sha256, location: where, published, source: this.label, signedBy, indexVersion: accepted.version, indexExpires: accepted.expires}
  }

  /**
   * A layer a node's input names (see layers/), from the same signed index as the input:
   * its bytes verified against the index's sha256 and size (65 otherwise, nothing kept);
   * null when the index lists no such layer.
   */
  async nodeLayer(name: string, options: FetchOptions): Promise<{text: string; bytes: Buffer; sha256: string; location: string} | null> {
    const {index} = await this.acceptedIndex(options)
    const published = own(index.layers, name)
    if (published === undefined) return null
    const where = this.transport.locate(published.layer)
    const bytes = await this.transport.read(published.layer, published.size)
    if (bytes === null) throw new RepositoryUnavailableError(`${where}: not found, though the index lists it for layer ${name}`, ['the repository may be mid-publish or incomplete: try again'])
    const sha256 = createHash('sha256').update(bytes).digest('hex')
    if (bytes.length !== published.size || sha256 !== published.sha256) {
      throw new ReleaseError(`${where}: layer ${name} does not match the signed index (sha256 ${sha256}, ${bytes.length} bytes; the index says ${published.sha256}, ${published.size} bytes); refused`)
    }

    return {text: decodeUtf8Strict(bytes, where, (message) => new InputError(`layer ${name}: ${message}; refused`)), bytes, sha256, location: where}
  }

  /** The index, read once per source (a node input and its releases come from the same index), judged fresh and remembered. */
  private acceptedIndex(options: FetchOptions): Promise<IndexRead> {
    this.accepted ??= this.readAccepted(options)
    return this.accepted
  }

  private accepted?: Promise<IndexRead>
  /** Whether the index was the copy this node kept, its server having answered 304. */
  private indexUnchanged = false
  /** The node whose input is fetched (nodeInput): its document is read instead of the index. */
  private node?: string
  /** The replay track (`<source>#node:<name>`) of the node's document, when the fetch runs on one. */
  private track?: string

  private async readAccepted(options: FetchOptions): Promise<IndexRead> {
    if (this.node === undefined) return this.readAcceptedIndex(options)
    const {readViaDocument} = await import('./node-document-source.js')
    const via = (repository: string | null) => readViaDocument({transport: this.transport, label: this.label, node: this.node!, keys: (o) => this.trustedKeys(o)}, options, repository)
    const read = (await via(null)) ?? (await this.readAcceptedIndex(options))
    // First contact with a repository of documents: the index gave its id, the document follows (kept, so the next tick is a 304).
    const document = !('track' in read) && read.index.nodeDocuments === true && read.index.repository !== undefined ? await via(read.index.repository) : null
    const chosen: IndexRead & {track?: string; unchanged?: boolean} = document ?? read
    if (chosen.track !== undefined) {
      this.track = chosen.track
      this.indexUnchanged = chosen.unchanged === true
    }

    return chosen
  }

  private async readAcceptedIndex(options: FetchOptions): Promise<IndexRead> {
    // The copy kept of the index accepted last, asked about with its validators (conditional/).
    const kept = this.transport.readConditional ? await this.keptIndex(options) : null
    const {index, signedBy, untrusted, fresh} = await this.readTrusted(options, kept)
    // Before anything is resolved or installed: an index older than one this node accepted,
    // or expired, is a refusal (65), never a reason to fall back. A kept copy is judged again, as a fresh one.
    const {acceptIndex, repositoryKey} = await import('./accepted-versions.js')
    const accepted = await acceptIndex(options.moduleDir, this.label, index, {allowUntrusted: options.allowUntrusted, channels: indexChannels(index), acceptRepository: options.acceptRepository, expectedRepository: options.expectedRepository})
    untrusted.push(...accepted.untrusted)
    if (fresh) await (await import('../conditional/kept-index.js')).keepIndex(options.moduleDir, repositoryKey(this.label), fresh)
    return {index, signedBy, accepted, untrusted}
  }

  /** The kept copy of this repository's index, only when it is of the version and id this node accepted last (see usableKeptIndex). */
  private async keptIndex(options: FetchOptions): Promise<KeptIndex | null> {
    const [{readAcceptedVersions, repositoryKey}, {usableKeptIndex}] = await Promise.all([import('./accepted-versions.js'), import('../conditional/kept-index.js')])
    const key = repositoryKey(this.label)
    const memory = await readAcceptedVersions(options.moduleDir, options.allowUntrusted).then(
      ({memory}) => memory,
      () => null,
    )
    return memory === null ? null : usableKeptIndex(options.moduleDir, key, memory.repositories[key])
  }

  /**
   * The index as it is now, for a reader that is not the node (fleet status --source): its
   * signature checked as a node checks it, and judged fresh against what this machine
   * accepted (an older version or an expired index is 65, as on a node; so is an index of
   * another id than the repository_id setting), but remembered nowhere: an operator's look
   * writes nothing into the module directory.
   */
  async currentIndex(options: FetchOptions): Promise<IndexRead> {
    const {index, signedBy, untrusted} = await this.readTrusted(options)
    const {judgeIndex, readAcceptedVersions} = await import('./accepted-versions.js')
    const {memory, untrusted: memoryProblems} = await readAcceptedVersions(options.moduleDir, options.allowUntrusted)
    const accepted = judgeIndex(memory, this.label, index, Date.now(), undefined, options.expectedRepository)
    return {index, signedBy, accepted, untrusted: [...untrusted, ...memoryProblems]}
  }

  /** index.json, with its signature verified when keys are trusted; refused unsigned over plain http or from a place others can write. */
  private async readTrusted(options: FetchOptions, kept: KeptIndex | null = null): Promise<Omit<IndexRead, 'accepted'> & {fresh: FreshIndex | null}> {
    const {keys, untrusted} = await this.trustedKeys(options)
    const {index, signedBy, fresh} = await this.readIndex(keys, kept)
    return {index, signedBy, untrusted, fresh}
  }

  /** The keys trusted now; refused unsigned over plain http or from a place others can write (what --allow-untrusted let through in `untrusted`). */
  private async trustedKeys(options: FetchOptions): Promise<{keys: Awaited<ReturnType<typeof loadTrustedKeys>>; untrusted: string[]}> {
    const keys = await loadTrustedKeys(options.trust ?? [], options.trustDir)
    if (keys.length === 0 && this.transport.kind === 'http' && !options.insecure) {
      throw new UsageError(`source ${this.label}: plain http with no trusted key; anyone on the path could substitute releases`, [
        'sign the repository (publish --sign) and trust its key (--trust or /etc/localpuppet/trusted-keys/), use https://, or pass --insecure',
      ])
    }

    // Unsigned, a directory repository is only as good as its place: if others can write
    // it, they can substitute releases, as anyone on the path can with plain http.
    const placeProblem = keys.length === 0 ? (this.transport.trustProblem?.() ?? null) : null
    refuseUnlessAllowed(placeProblem, {allow: options.allowUntrusted, content: true, hints: [UNSIGNED_HINT]})
    return {keys, untrusted: placeProblem ? [placeProblem.message] : []}
  }

  /**
   * index.json (and, when keys are trusted, its signature, which must verify). With a kept
   * copy, asked for conditionally: on a 304 the kept bytes and signature are verified again
   * with the keys trusted now (its signature is not asked for again: one request per tick).
   * `fresh`: what was read, to keep once accepted, when the transport can ask conditionally.
   */
  private async readIndex(keys: Awaited<ReturnType<typeof loadTrustedKeys>>, kept: KeptIndex | null): Promise<{index: RepositoryIndex; signedBy: string | null; fresh: FreshIndex | null}> {
    const where = this.transport.locate(REPOSITORY_INDEX)
    // A publisher replaces the signature, then the index: a reader caught in between sees
    // them disagree, so one more read of both settles it (without the kept copy).
    for (let attempt = 0; ; attempt++) {
      const ask = attempt === 0 ? kept : null
      let bytes: Buffer | null
      let validators: Validators | null = null
      let signature: Buffer | null = null
      this.indexUnchanged = false
      if (this.transport.readConditional) {
        const answer = await this.transport.readConditional(REPOSITORY_INDEX, MAX_REPOSITORY_INDEX_BYTES, ask?.validators ?? null)
        if (answer?.status === 'unchanged') {
          bytes = ask!.bytes
          signature = ask!.signature
          this.indexUnchanged = true
        } else {
          bytes = answer?.bytes ?? null
          validators = answer?.validators ?? null
        }
      } else {
        bytes = await this.transport.read(REPOSITORY_INDEX, MAX_REPOSITORY_INDEX_BYTES)
      }

      if (bytes === null) throw new RepositoryUnavailableError(`no release repository at ${this.label}: ${where} not found`, ['check the source; publish creates the repository'])
      let signedBy: string | null = null
      if (keys.length > 0) {
        if (!this.indexUnchanged) signature = await this.transport.read(REPOSITORY_SIGNATURE, 64 * 1024)
        // A copy kept while no key was trusted has no signature: asked for again, whole.
        if (signature === null && this.indexUnchanged) continue
        if (signature === null) throw new ReleaseError(`${where}: not signed, and trusted keys are configured`, ['publish with --sign KEY.pem'])
        try {
          signedBy = verifyIndexSignature(bytes, signature, keys, where)
        } catch (error) {
          if (attempt === 0) continue
          throw error
        }
      }

      const index = this.indexUnchanged ? ask!.index : parseRepositoryIndex(bytes, where)
      return {index, signedBy, fresh: validators ? {bytes, signature, validators} : null}
    }
  }

  private resolve(index: RepositoryIndex, ref: ReleaseRef): {ref: string; app: string; tag: string} {
    if (ref.kind === 'trunk' || ref.kind === 'branch') {
      throw new UsageError(`${ref.text}: repositories hold tags only, not ${ref.kind === 'trunk' ? 'trunk' : 'branches'}`, [`fetch a tag (${ref.app}/tags/1.0.0) or a range (${ref.app}@^1)`])
    }

    const tag = tagInIndex(index, ref)
    if (tag !== undefined) return {ref: ref.text, app: ref.app, tag}
    const app = own(index.apps, ref.app)
    if (ref.kind === 'channel') {
      const channels = Object.keys(app?.channels ?? {})
      throw new NotFoundError(`${ref.text}: the repository ${this.label} has no channel ${ref.channel} of ${ref.app}${channels.length > 0 ? `; it has ${channels.join(', ')}` : ''}`, [
        `promote a tag to it: localpuppet promote ${ref.app}/tags/TAG --channel ${ref.channel} --repo DIR`,
      ])
    }

    const tags = Object.keys(app?.tags ?? {})
    // A yanked tag is said to be one: a range skips it.
    const known = sortTagsNewestFirst(tags)
      .slice(0, 5)
      .map((tag) => (app!.tags[tag].yanked ? `${tag} (yanked)` : tag))
    const shown = tags.length === 0 ? `; the repository has no tags of ${ref.app}` : `; it has ${known.join(', ')}${tags.length > known.length ? ', ...' : ''}`
    if (ref.kind === 'tag') throw new NotFoundError(`${ref.text} is not in the repository ${this.label}${shown}`)
    throw new NotFoundError(`${ref.text}: no tag of ${ref.app} in the repository ${this.label} satisfies ${JSON.stringify(ref.range)}${shown}`)
  }

  /**
   * Present when every release the archive holds is installed with the digest the index
   * gives; a recorded tag with another digest is a conflict (73) found before downloading.
   */
  private async isPresent(moduleDir: string, published: PublishedTag): Promise<boolean> {
    let present = true
    for (const release of published.modulepath) {
      // The digest comes before the file list: only the record's head is read.
      const record = readRecordHead(moduleDir, release)
      if (record === null) {
        present = false
        continue
      }

      if (record.digest !== published.digests[release]) {
        throw new ConflictError(`${release} is installed with other content (${record.digest}) than the repository's (${published.digests[release]})`, [
          'tags are immutable: publish a new tag',
        ])
      }

      // A tag still writable was renamed into place by an install killed before it was made
      // read-only: installed again, which finishes the job (Staging.commit).
      const exists = await lstat(join(moduleDir, release)).then(
        (info) => info.isDirectory() && (info.mode & 0o222) === 0,
        () => false,
      )
      if (!exists) present = false
    }

    return present
  }

  private async install(release: string, published: PublishedTag, options: FetchOptions, indexSignedBy: string | null): Promise<Delivered> {
    // Only what the installed tags lack, when the repository offers objects and that is less than the archive.
    const {installDelta} = await import('../delta/install-delta.js')
    const onProgress = options.onProgress && ((bytes: number, total: number) => options.onProgress!({release, bytes, total}))
    const delta = await installDelta(this.transport, published, {moduleDir: options.moduleDir, allowUntrusted: options.allowUntrusted, signedBy: indexSignedBy, onProgress})
    if (delta) return {...delta, delivery: 'objects'}
    // Loaded only to install: a fetch that finds every release present never loads tar.
    const [{installArchive}, {readArchiveHead}] = await Promise.all([import('../install/install-archive.js'), import('../repository/archive-head.js')])
    const downloads = downloadsDir(options.moduleDir)
    try {
      if (!(await lstat(options.moduleDir)).isDirectory()) throw Object.assign(new Error('not a directory'), {code: 'ENOTDIR'})
      await mkdir(localpuppetDir(options.moduleDir), {recursive: true, mode: 0o755})
      await mkdir(downloads, {recursive: true, mode: 0o700})
    } catch (error) {
      throw describeFsError(error, `module directory ${options.moduleDir}`)
    }

    const temp = downloadPath(downloads)
    const where = this.transport.locate(published.archive)
    try {
      await this.transport.download(published.archive, temp, published, options.onProgress && ((bytes) => options.onProgress!({release, bytes, total: published.size})))
      // The archive must hold what the index says it does, before anything is installed.
      const {index} = await readArchiveHead(temp, where)
      const differs = archiveDisagreement(index, release, published)
      if (differs) throw new ReleaseError(`${where}: holds ${index.release} (${index.modulepath.join(', ')}), not what the index says for ${release}: ${differs}; refused`)
      const installed = await installArchive(createReadStream(temp, {highWaterMark: 1024 * 1024}), where, {moduleDir: options.moduleDir, trust: options.trust, trustDir: options.trustDir, allowUntrusted: options.allowUntrusted})
      const files = index.releases.reduce((sum, entry) => sum + entry.files, 0)
      return {...installed, bytes: published.size, delivery: 'archive', files: {shared: 0, written: files, downloaded: files}}
    } finally {
      await rm(temp, {force: true})
    }
  }
}

/** An install from a repository: how it came, and what it cost. */
type Delivered = InstallResult & {bytes: number; delivery: 'archive' | 'objects'; files: {shared: number; written: number; downloaded: number}}
/** An index as read from its server, with the validators it came with: kept once accepted (conditional/kept-index.ts). */
interface FreshIndex {
  bytes: Buffer
  signature: Buffer | null
  validators: Validators
}

/**
 * A node input's text, only if it is UTF-8 (65 naming the input and the line otherwise):
 * decoded leniently, its bad bytes would be replaced, so the input applied would not be the
 * one signed, and the copy kept would never match the index (downloaded again every run).
 */
function nodeInputText(bytes: Buffer, where: string, node: string): string {
  return decodeUtf8Strict(bytes, where, (message) =>
    new InputError(`input of node ${node}: ${message}; refused, the input kept as it was`, [
      `the publisher saves it as UTF-8 and publishes it again: localpuppet publish --node ${node} --input FILE --repo DIR (publish refuses anything but UTF-8)`,
    ]),
  )
}

/**
 * How an archive's release.json differs from the index entry it was downloaded for (its
 * release, modulepath in order, and each release's digest), or null when it holds exactly that.
 */
export function archiveDisagreement(held: {release: string; modulepath: string[]; releases: Array<{release: string; digest: string}>}, release: string, published: PublishedTag): string | null {
  if (held.release !== release) return `another release`
  if (held.modulepath.length !== published.modulepath.length || held.modulepath.some((r, i) => published.modulepath[i] !== r)) {
    return `its modulepath is ${held.modulepath.join(', ')}, the index says ${published.modulepath.join(', ')}`
  }

  const digests = new Map(held.releases.map((r) => [r.release, r.digest]))
  const other = published.modulepath.find((r) => digests.get(r) !== published.digests[r])
  return other === undefined ? null : `${other} is ${digests.get(other) ?? 'missing'} in it, ${published.digests[other]} in the index`
}
