import {createHash} from 'node:crypto'
import type {Dirent} from 'node:fs'
import {mkdir, readdir} from 'node:fs/promises'
import {dirname, join} from 'node:path'

import {InputError, NotFoundError, UsageError, describeFsError} from '../errors.js'
import {writeFileAtomic} from '../util/atomic-write.js'
import {own} from '../util/own.js'
import {terminalText} from '../util/terminal-text.js'
import {parseNodeInput} from '../input/node-input.js'
import {readInputText} from '../input/read-input.js'
import type {ReleaseRef} from '../release/release-ref.js'
import {MAX_NODE_INPUT_BYTES, type PublishedInput, type RepositoryIndex, inputPathFor, isValidNodeName, tagInIndex} from './repository-index.js'
import {checkStoredCopy} from './stored-copy.js'
import {yankNamedBy} from './channel-records.js'

/** A node input to publish: the node's name and the file it comes from. */
export interface NodeInputFile {
  node: string
  file: string
  /** Read only as a regular file, never through a symbolic link (an entry of `--inputs DIR`). */
  noFollow?: boolean
}

/** A node input read and validated, ready to go into the repository. */
export interface CheckedNodeInput extends NodeInputFile {
  bytes: Buffer
  sha256: string
  app: string
  ref: ReleaseRef
  /** `age`: bytes are the ciphertext publish stores (secrets/seal-inputs.ts). */
  encrypted?: 'age'
}

export interface PublishedNodeInput {
  node: string
  input: string
  sha256: string
  app: string
  /**
   * added: a node new to the repository; updated: its input changed; unchanged: the same
   * bytes; repaired: the same bytes, but the repository's copy was missing or changed, so it
   * was written again (the index entry kept).
   */
  status: 'added' | 'updated' | 'unchanged' | 'repaired'
  /** Stored encrypted to the node (and the operators): each publish encrypts it afresh. */
  encrypted?: 'age'
}

/**
 * `--inputs DIR`: every `NAME.yaml` in it is node NAME's input. Only regular files: a
 * symbolic link (which could lead anywhere: `web1.yaml -> /etc/shadow` would publish, or
 * quote in an error, a file the directory's writer cannot read), a FIFO, a device or a
 * directory is refused (65 naming the entry, nothing published), before any is read; each
 * is then opened with O_NOFOLLOW, so one swapped for a link meanwhile is refused too.
 */
export async function nodeInputsIn(dir: string): Promise<NodeInputFile[]> {
  let entries: Dirent[]
  try {
    entries = await readdir(dir, {withFileTypes: true})
  } catch (error) {
    throw describeFsError(error, `--inputs ${dir}`)
  }

  const files = entries.filter((entry) => entry.name.endsWith('.yaml')).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
  if (files.length === 0) throw new NotFoundError(`--inputs ${dir}: no NAME.yaml files (one per node, named by the node)`)
  const odd = files.find((entry) => !entry.isFile())
  if (odd) {
    throw new InputError(`--inputs ${terminalText(dir)}: ${terminalText(odd.name)} ${entryKind(odd)}, not a regular file; only regular files are published (nothing published)`, [
      'put the input itself in the directory (cp --dereference), or publish it with --node NAME --input FILE',
    ])
  }

  return files.map((entry) => ({node: entry.name.slice(0, -'.yaml'.length), file: join(dir, entry.name), noFollow: true}))
}

function entryKind(entry: Dirent): string {
  if (entry.isSymbolicLink()) return 'is a symbolic link'
  if (entry.isDirectory()) return 'is a directory'
  if (entry.isFIFO()) return 'is a FIFO (named pipe)'
  if (entry.isCharacterDevice() || entry.isBlockDevice()) return 'is a device'
  if (entry.isSocket()) return 'is a socket'
  return 'is of an unknown kind'
}

/**
 * Reads and validates each node input as apply would (65 naming the file, key and line),
 * before the repository is touched: the node's name must be a host name, and its app a
 * tag, a range or a channel (a repository holds no trunk or branch, so a node could never
 * fetch one).
 */
export async function checkNodeInputs(inputs: NodeInputFile[]): Promise<CheckedNodeInput[]> {
  const seen = new Set<string>()
  const checked: CheckedNodeInput[] = []
  for (const {node, file, noFollow} of inputs) {
    // The name is a file's in --inputs DIR, anything a file name may hold: shown escaped.
    if (!isValidNodeName(node)) throw new UsageError(`node name ${terminalText(JSON.stringify(node))} (${terminalText(file)}): not a host name (lowercase letters, digits, '.', '-', '_')`)
    if (seen.has(node)) throw new UsageError(`node ${node}: two inputs given`)
    seen.add(node)
    const {text} = await readInputText(file, undefined, undefined, {noFollow})
    const input = parseNodeInput(text, file)
    if (input.app.kind === 'trunk' || input.app.kind === 'branch') {
      throw new InputError(`${file}: app ${input.app.text}: a repository holds tags only, so node ${node} could never fetch it`, [`name a tag (${input.app.app}/tags/1.0.0), a range (${input.app.app}@^1) or a channel (${input.app.app}/channels/stable)`])
    }

    const bytes = Buffer.from(text, 'utf8')
    checked.push({node, file, bytes, sha256: createHash('sha256').update(bytes).digest('hex'), app: input.app.text, ref: input.app})
  }

  return checked
}

/**
 * Each document as stored (computed, sealed) must be one a node reads: the index check
 * refuses a node entry over MAX_NODE_INPUT_BYTES, so listing it would make every node
 * refuse the whole index. 65 naming the node, before the repository is touched.
 */
export function assertNodeInputSizes(inputs: ReadonlyArray<Pick<CheckedNodeInput, 'node' | 'file' | 'bytes'>>): void {
  for (const {node, file, bytes} of inputs) {
    if (bytes.length > MAX_NODE_INPUT_BYTES) throw new InputError(`node ${node} (${terminalText(file)}): its document is ${bytes.length} bytes, more than the ${MAX_NODE_INPUT_BYTES / 1024 / 1024} MiB a node reads of its input (nothing published)`)
  }
}

/**
 * Under the repository's lock, with the index just read: each input's app must resolve in
 * it (a tag it lists, a range a tag satisfies, a channel it has: 66 naming the node
 * otherwise, as the node would meet it), then the input is written by its content
 * (`inputs/NODE/<sha256>.yaml`: temp file, fsync, rename) and the index entry set. The
 * same input again leaves the entry as it is, and writes the file again only when the
 * repository's copy is missing or no longer those bytes (which nodes refuse).
 */
export async function addNodeInputs(repo: string, index: RepositoryIndex, inputs: CheckedNodeInput[], now: () => number): Promise<PublishedNodeInput[]> {
  const results: PublishedNodeInput[] = []
  for (const input of inputs) assertResolvable(index, input)
  for (const input of inputs) {
    const before = own(index.nodes, input.node)
    const path = inputPathFor(input.node, input.sha256)
    if (before?.sha256 === input.sha256 && before.size === input.bytes.length) {
      // The same input: the index stays as it is, but a stored copy nodes would refuse is written again.
      const stored = await checkStoredCopy(join(repo, path), before)
      if (stored !== 'intact') await writeInto(join(repo, path), input.bytes)
      results.push({node: input.node, input: path, sha256: input.sha256, app: input.app, status: stored === 'intact' ? 'unchanged' : 'repaired'})
      continue
    }

    await writeInto(join(repo, path), input.bytes)
    const encrypted = input.encrypted ? {encrypted: input.encrypted} : {}
    const published: PublishedInput = {input: path, size: input.bytes.length, sha256: input.sha256, app: input.app, publishedAt: new Date(now()).toISOString(), ...encrypted}
    ;(index.nodes ??= {})[input.node] = published
    results.push({node: input.node, input: path, sha256: input.sha256, app: input.app, status: before ? 'updated' : 'added', ...encrypted})
  }

  return results
}

/** 66 naming the input's file and node when its app resolves to no tag of the index, as the node would meet it. */
export function assertResolvable(index: RepositoryIndex, input: CheckedNodeInput): void {
  const {ref} = input
  // A yanked tag named exactly (or by a channel): no node input may point at it.
  const yanked = yankNamedBy(index, ref)
  if (yanked !== null) throw new NotFoundError(`${input.file}: node ${input.node}'s app ${input.app}: ${yanked}; a node would not install it`, ['name another tag, a range or a channel'])
  if ((ref.kind !== 'tag' && ref.kind !== 'channel' && ref.kind !== 'range') || tagInIndex(index, ref) !== undefined) return
  const why =
    ref.kind === 'tag'
      ? `the repository has no tag ${ref.tag} of ${ref.app}`
      : ref.kind === 'channel'
        ? `the repository has no channel ${ref.channel} of ${ref.app}`
        : `no tag of ${ref.app} in the repository satisfies ${JSON.stringify(ref.range)}`
  throw new NotFoundError(`${input.file}: node ${input.node}'s app ${input.app}: ${why}`, ['publish the release first (both may be given to one publish), or promote a tag to the channel'])
}

/** Writes a new file (temp file, fsync, rename: writeFileAtomic); 0644 so a web server can read it. */
async function writeInto(target: string, bytes: Buffer): Promise<void> {
  try {
    await mkdir(dirname(target), {recursive: true, mode: 0o755})
    await writeFileAtomic(target, bytes, 0o644)
  } catch (error) {
    throw describeFsError(error, target)
  }
}
