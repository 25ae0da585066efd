import {ReleaseError} from '../errors.js'
import {isSafeRelativePath, parseReleasePath} from '../archive/release-index.js'
import {type PublishedLayer, checkIndexLayers} from '../layers/published-layers.js'
import {type ReleaseRef, isValidChannelName, isValidVersionName, maxSatisfyingTag} from '../release/release-ref.js'
import {isMapping} from '../util/json.js'
import {own} from '../util/own.js'
import {type YankRecord, yankRecordProblem} from './yank-record.js'

/** A release repository's table of contents, at its root. */
export const REPOSITORY_INDEX = 'index.json'
/** The Ed25519 signature over index.json's exact bytes (same format as release.json.sig). */
export const REPOSITORY_SIGNATURE = 'index.json.sig'
export const REPOSITORY_FORMAT = 1
/** An index larger than this is refused before parsing: ~30,000 tags fit in 16 MiB. */
export const MAX_REPOSITORY_INDEX_BYTES = 16 * 1024 * 1024
/** Archives larger than this are refused, whatever the index says. */
export const MAX_ARCHIVE_BYTES = 16 * 1024 * 1024 * 1024

/** One published tag: its archive and what the archive holds. */
export interface PublishedTag {
  /** The archive's path relative to the repository root, `archives/foo/foo-1.5.0.tar.gz`. */
  archive: string
  size: number
  /** sha256 of the archive's bytes, hex. */
  sha256: string
  /** The tag's release digest (`sha256:...`), as in release.json. */
  digest: string
  /** The release's own resolved modulepath, app first: every release the archive holds. */
  modulepath: string[]
  /** The release digest of each release on the modulepath. */
  digests: Record<string, string>
  /** The key id of the archive's release.json signature, or null when unsigned. */
  signedBy: string | null
  publishedAt: string
  /**
   * Set by `repository yank`: no channel or node input may name the tag, and nodes do not
   * newly install it (one that has it keeps it). Kept on the tag entry, which publishers older
   * than yanks write back as they read it; nodes older than yanks ignore it.
   */
  yanked?: YankRecord
  /**
   * The tag's content-addressed objects (delta/objects.ts): its manifest's sha256 and size,
   * for a node that has most of its files already. Optional: absent in tags published
   * before, and ignored by nodes that predate it (they download the archive).
   */
  objects?: {manifest: string; size: number}
}

/**
 * How long a published index stays valid unless `publish --expires` says otherwise: long
 * enough that a repository re-signed by a monthly timer (or any release) never lapses,
 * short enough that a node frozen on a replayed index notices within a month.
 */
export const DEFAULT_INDEX_EXPIRY_MS = 30 * 86_400_000


/**
 * A node's input published into the repository (`publish --node NAME --input FILE`): where
 * it is and its sha256, which the index's signature covers, so a node verifies the bytes it
 * downloads against the signed index. Stored by content (`inputs/NAME/<sha256>.yaml`): a
 * node reading while a publisher replaces it gets the old index and the old file, or both new.
 */
export interface PublishedInput {
  input: string
  size: number
  sha256: string
  /** The input's `app` as written (a tag, a range or a channel): what fleet status compares against. */
  app: string
  publishedAt: string
  /**
   * `age`: the stored input is an age ciphertext (ASCII-armored) encrypted to the node's
   * key (secrets/), and `sha256` is the ciphertext's. Absent: plain YAML. A node older than
   * encryption ignores the field and refuses the ciphertext as an input that is no mapping (65).
   */
  encrypted?: 'age'
}

/** A node input is at most this large (as an input.yaml is). */
export const MAX_NODE_INPUT_BYTES = 1024 * 1024

/** A node's name: a host name or Puppet certname (lowercase letters, digits, '.', '-', '_'), one path segment. */
const NODE_NAME = /^[a-z0-9](?:[a-z0-9._-]{0,252})$/

export function isValidNodeName(name: string): boolean {
  return NODE_NAME.test(name) && !name.includes('..')
}

/** The repository's path for a node's input: `inputs/web1/<sha256>.yaml`. */
export function inputPathFor(node: string, sha256: string): string {
  return `inputs/${node}/${sha256}.yaml`
}

/** A repository's identity as publish writes it into the index: 128 random bits, hex. */
export const REPOSITORY_ID = /^[0-9a-f]{32}$/

export interface RepositoryIndex {
  format: typeof REPOSITORY_FORMAT
  /**
   * The repository's identity, drawn at random by its first publish and kept by every
   * later one: a node pins it per source, so another repository's index (signed with the
   * same key: staging and production) copied over this one is refused. Absent in indexes
   * made before identities.
   */
  repository?: string
  /**
   * Grows by one with every publish (a fresh repository starts at 1): a node refuses an
   * index older than one it accepted (a replay). Absent in indexes made before versions.
   */
  version?: number
  /** When the index stops being believed (ISO 8601): bounds how long a replayed index can freeze a node. Absent with `version`. */
  expires?: string
  /** Per app: its tags, and its channels (`stable` → `1.4.0`: a tag of the app), set by `promote`. */
  apps: Record<string, {tags: Record<string, PublishedTag>; channels?: Record<string, string>; history?: Record<string, unknown>; policies?: Record<string, unknown>}>
  /** Node inputs by node name (`publish --node`). */
  nodes?: Record<string, PublishedInput>
  /** Layers node inputs name, by name (`publish --layers DIR`; see layers/). Optional: older nodes ignore it. */
  layers?: Record<string, PublishedLayer>
  /** Each node's document is published under `nodes/` (node-documents/): a node reads its own instead of this index. Optional: older nodes ignore it. */
  nodeDocuments?: true
  /**
   * `publish --node-documents-only`: `nodes` is not in index.json, each node's entry is in its
   * document only. A node older than documents finds no input for its name (66).
   */
  nodesInDocuments?: true
  /** With `nodesInDocuments`: some node's input is (or was) encrypted, so a plain one is refused without reading every document (secrets/). */
  encryptedInputs?: true
}

export function emptyRepositoryIndex(): RepositoryIndex {
  return {format: REPOSITORY_FORMAT, apps: {}}
}

/** A record with its keys in sorted order (what makes a signed file's bytes one per content). */
export function sorted<T>(record: Record<string, T>): Record<string, T> {
  return Object.fromEntries(Object.keys(record).sort().map((key) => [key, record[key]]))
}

/** Sorted keys, so the same repository always serialises to the same bytes. */
export function serializeRepositoryIndex(index: RepositoryIndex): Buffer {
  const apps = Object.fromEntries(
    Object.keys(index.apps)
      .sort()
      .map((app) => {
        const {tags, channels, history, policies} = index.apps[app]
        // history and policies (channels/): optional, read by publishers only; nodes ignore them.
        const some = <T>(name: string, record: Record<string, T> | undefined) => (record && Object.keys(record).length > 0 ? {[name]: sorted(record)} : {})
        return [app, {tags: sorted(tags), ...some('channels', channels), ...some('history', history), ...some('policies', policies)}]
      }),
  )
  const identity = index.repository === undefined ? {} : {repository: index.repository}
  const versioned = index.version === undefined ? {} : {version: index.version, expires: index.expires}
  const nodes = index.nodesInDocuments !== true && index.nodes && Object.keys(index.nodes).length > 0 ? {nodes: sorted(index.nodes)} : {}
  const layers = index.layers && Object.keys(index.layers).length > 0 ? {layers: sorted(index.layers)} : {}
  const documents = {...(index.nodeDocuments === true ? {nodeDocuments: true} : {}), ...(index.nodesInDocuments === true ? {nodesInDocuments: true} : {}), ...(index.nodesInDocuments === true && index.encryptedInputs === true ? {encryptedInputs: true} : {})}
  return Buffer.from(JSON.stringify({format: index.format, ...identity, ...versioned, apps, ...nodes, ...layers, ...documents}, null, 1) + '\n')
}

const SHA256 = /^[0-9a-f]{64}$/
const DIGEST = /^sha256:[0-9a-f]{64}$/
/** As Date.prototype.toISOString writes it, the one form publish writes. */
const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,3})?Z$/

/**
 * Parses a repository's index.json trusting nothing: every app and tag name, archive path
 * (relative, no `..`), size, hash, digest and modulepath entry is checked, so that a
 * hostile index can name nothing outside the repository or the module directory.
 * Any fault is a ReleaseError (65) naming the entry.
 */
export function parseRepositoryIndex(bytes: Buffer, label: string): RepositoryIndex {
  const fail = (why: string): never => {
    throw new ReleaseError(`${label}: ${why}`)
  }

  if (bytes.length > MAX_REPOSITORY_INDEX_BYTES) fail(`larger than ${MAX_REPOSITORY_INDEX_BYTES} bytes`)
  let doc: unknown
  try {
    doc = JSON.parse(bytes.toString('utf8'))
  } catch (error) {
    return fail(`not valid JSON (${(error as Error).message})`)
  }

  const index = doc as RepositoryIndex
  if (!isMapping(index)) fail('not a repository index (expected an object)')
  // A node's document (node-documents/) served as the index: it would stand for a whole repository.
  if ((index as {kind?: unknown}).kind !== undefined) fail(`kind ${JSON.stringify((index as {kind?: unknown}).kind)}: a node's document, not a repository index`)
  if (index.nodeDocuments !== undefined && index.nodeDocuments !== true) fail(`invalid nodeDocuments ${JSON.stringify(index.nodeDocuments)} (expected true)`)
  if (index.nodesInDocuments !== undefined && (index.nodesInDocuments !== true || index.nodes !== undefined)) fail(`invalid nodesInDocuments ${JSON.stringify(index.nodesInDocuments)} (expected true, and no nodes)`)
  if (index.encryptedInputs !== undefined && index.encryptedInputs !== true) fail(`invalid encryptedInputs ${JSON.stringify(index.encryptedInputs)} (expected true)`)
  if (index.format !== REPOSITORY_FORMAT) fail(`format ${JSON.stringify(index.format)} is not supported (this localpuppet reads format ${REPOSITORY_FORMAT})`)
  // Both or neither: an index made before versions has neither; one of the two alone is no index localpuppet wrote.
  if (index.version !== undefined || index.expires !== undefined) {
    if (!Number.isSafeInteger(index.version) || index.version! < 1) fail(`invalid version ${JSON.stringify(index.version)} (expected an integer from 1)`)
    if (typeof index.expires !== 'string' || !ISO_TIME.test(index.expires) || Number.isNaN(Date.parse(index.expires))) fail(`invalid expires ${JSON.stringify(index.expires)} (expected an ISO 8601 time)`)
  }

  if (index.repository !== undefined && (typeof index.repository !== 'string' || !REPOSITORY_ID.test(index.repository))) {
    fail(`invalid repository ${JSON.stringify(index.repository)} (expected 32 hex digits)`)
  }

  if (!isMapping(index.apps)) fail('apps is not an object')
  for (const [app, entry] of Object.entries(index.apps)) {
    if (!isMapping(entry) || !isMapping(entry.tags)) fail(`app ${JSON.stringify(app)}: tags is not an object`)
    for (const [tag, published] of Object.entries(entry.tags)) {
      const release = `${app}/tags/${tag}`
      const where = `tag ${JSON.stringify(release)}`
      const parsed = parseReleasePath(release)
      if (!parsed || parsed.app !== app || parsed.kind !== 'tag' || parsed.name !== tag) fail(`${where}: invalid app or tag name`)
      if (!isMapping(published)) fail(`${where}: not an object`)
      const p = published
      if (typeof p.archive !== 'string' || !isSafeRelativePath(p.archive)) fail(`${where}: archive path ${JSON.stringify(p.archive)} is absolute, has '..' or is invalid`)
      if (!Number.isSafeInteger(p.size) || p.size < 0 || p.size > MAX_ARCHIVE_BYTES) fail(`${where}: invalid size ${JSON.stringify(p.size)}`)
      if (typeof p.sha256 !== 'string' || !SHA256.test(p.sha256)) fail(`${where}: invalid sha256`)
      if (typeof p.digest !== 'string' || !DIGEST.test(p.digest)) fail(`${where}: invalid digest`)
      if (!Array.isArray(p.modulepath) || p.modulepath[0] !== release) fail(`${where}: modulepath must start with the release itself`)
      if (!isMapping(p.digests)) fail(`${where}: digests is not an object`)
      const seen = new Set<string>()
      for (const entry of p.modulepath) {
        const dependency = typeof entry === 'string' ? parseReleasePath(entry) : null
        if (!dependency || dependency.kind !== 'tag') fail(`${where}: modulepath entry ${JSON.stringify(entry)} is not a tag (repositories hold tags only)`)
        if (seen.has(entry)) fail(`${where}: modulepath lists ${entry} twice`)
        seen.add(entry)
        if (typeof p.digests[entry] !== 'string' || !DIGEST.test(p.digests[entry])) fail(`${where}: no valid digest for ${entry}`)
      }

      if (Object.keys(p.digests).length !== seen.size) fail(`${where}: digests name releases not on its modulepath`)
      if (p.digests[release] !== p.digest) fail(`${where}: digest differs from its modulepath digest`)
      if (p.signedBy !== null && typeof p.signedBy !== 'string') fail(`${where}: invalid signedBy`)
      const yank = p.yanked === undefined ? null : yankRecordProblem(p.yanked)
      if (yank !== null) fail(`${where}: ${yank}`)
      if (p.objects !== undefined && (!isMapping(p.objects) || typeof p.objects.manifest !== 'string' || !SHA256.test(p.objects.manifest) || !Number.isSafeInteger(p.objects.size) || p.objects.size < 0 || p.objects.size > MAX_REPOSITORY_INDEX_BYTES * 4)) {
        fail(`${where}: invalid objects`)
      }
    }

    if (entry.channels !== undefined) {
      if (!isMapping(entry.channels)) fail(`app ${JSON.stringify(app)}: channels is not an object`)
      for (const [channel, tag] of Object.entries(entry.channels)) {
        const where = `channel ${JSON.stringify(`${app}/channels/${channel}`)}`
        if (!isValidChannelName(channel)) fail(`${where}: invalid channel name`)
        if (typeof tag !== 'string' || !isValidVersionName(tag)) fail(`${where}: invalid tag ${JSON.stringify(tag)}`)
        if (!Object.hasOwn(entry.tags, tag)) fail(`${where}: names tag ${JSON.stringify(tag)}, which the index does not list`)
      }
    }
  }

  if (index.nodes !== undefined) {
    if (!isMapping(index.nodes)) fail('nodes is not an object')
    for (const [node, published] of Object.entries(index.nodes)) {
      const where = `node ${JSON.stringify(node)}`
      if (!isValidNodeName(node)) fail(`${where}: invalid node name`)
      if (!isMapping(published)) fail(`${where}: not an object`)
      const p = published
      if (typeof p.sha256 !== 'string' || !SHA256.test(p.sha256)) fail(`${where}: invalid sha256`)
      // Exactly where publish puts it: an entry cannot point one node at another's input.
      if (p.input !== inputPathFor(node, p.sha256)) fail(`${where}: input path ${JSON.stringify(p.input)} is not ${inputPathFor(node, p.sha256)}`)
      if (!Number.isSafeInteger(p.size) || p.size < 0 || p.size > MAX_NODE_INPUT_BYTES) fail(`${where}: invalid size ${JSON.stringify(p.size)}`)
      if (typeof p.app !== 'string' || p.app.length > 300) fail(`${where}: invalid app`)
      if (p.encrypted !== undefined && p.encrypted !== 'age') fail(`${where}: encrypted ${JSON.stringify(p.encrypted)} is not supported (this localpuppet reads age)`)
    }
  }

  checkIndexLayers(index.layers, fail)
  return index
}

/** The repository's path for an archive: `archives/foo/foo-1.5.0.tar.gz`. */
export function archivePathFor(app: string, tag: string): string {
  return `archives/${app}/${app}-${tag}.tar.gz`
}

/** Every channel of the index, as `app/channels/name` → tag. */
export function indexChannels(index: RepositoryIndex): Record<string, string> {
  const channels: Record<string, string> = {}
  for (const [app, entry] of Object.entries(index.apps)) for (const [channel, tag] of Object.entries(entry.channels ?? {})) channels[`${app}/channels/${channel}`] = tag
  return channels
}

/**
 * The tag a reference names in the index, as apply --fetch resolves it: a tag the index
 * lists, the tag a channel names, a range's newest match that is not yanked (a range that
 * is a tag's exact name is that tag); undefined when the index has none.
 */
export function tagInIndex(index: RepositoryIndex, ref: Extract<ReleaseRef, {kind: 'tag' | 'channel' | 'range'}>): string | undefined {
  const app = own(index.apps, ref.app)
  if (ref.kind === 'channel') return own(app?.channels, ref.channel)
  const tags = Object.keys(app?.tags ?? {})
  if (ref.kind === 'tag') return tags.includes(ref.tag) ? ref.tag : undefined
  // A range never resolves to a yanked tag (the newest match that is not); one named exactly is its caller's to refuse.
  return tags.includes(ref.range) ? ref.range : maxSatisfyingTag(tags.filter((tag) => app!.tags[tag].yanked === undefined), ref.range)
}
