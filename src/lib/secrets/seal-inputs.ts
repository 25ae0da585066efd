import {dirname, join} from 'node:path'

import {MAX_YAML_BYTES} from '../yaml.js'
import {readBoundedFile} from '../util/bounded-read.js'

import {InputError, describeFsError} from '../errors.js'
import {terminalText} from '../util/terminal-text.js'
import {readRecipientsFile} from './recipients.js'
import {layerSecretPath} from './secret-values.js'

/** What publish stores for one node: its document (or ciphertext), and how publish reads the node's recipients. */
export interface NodeDocument {
  node: string
  /** The file it came from: NAME.pub is looked for beside it. */
  file: string
  bytes: Buffer
  sha256: string
}

/** How publish encrypts node inputs. */
export interface SealOptions {
  /** Operator recipients (audit, break-glass): added to every encrypted input. */
  operators?: readonly string[]
  /** --allow-plain-input: publish an input without a recipient to a repository that has encrypted ones. */
  allowPlain?: boolean
}

/** The form a node input is stored in: `age` when encrypted (the index entry's `encrypted`). */
export type Sealed<T> = T & {encrypted?: 'age'; recipients?: string[]}

/** The node's recipients file: `NAME.pub` beside the node's input file (nodes/web1.yaml → nodes/web1.pub). */
export function nodeRecipientsPath(node: string, file: string): string {
  return join(dirname(file), `${node}.pub`)
}

/**
 * Before the repository is touched: each node with a `NAME.pub` beside its input gets its
 * document replaced by the ciphertext (`encryptDocument`, to the node's recipients and the
 * operators'), and its sha256 by the ciphertext's, which the signed index lists. A node
 * without one stays plain, unless its input marks secrets (`!secret`): that is refused
 * (65), whatever flag is given, since the secrets would be published in clear.
 */
export async function sealNodeDocuments<T extends NodeDocument>(documents: T[], options: SealOptions, marksSecrets: (doc: T) => boolean): Promise<Array<Sealed<T>>> {
  const sealed: Array<Sealed<T>> = []
  const owners = new Map<string, string>()
  for (const doc of documents) {
    const recipients = await readRecipientsFile(nodeRecipientsPath(doc.node, doc.file), `recipients of node ${doc.node}`, 'absent')
    // One key on two nodes (a machine cloned after node-key ran, a NAME.pub copied) lets each read the other's input.
    for (const recipient of recipients ?? []) {
      const owner = owners.get(recipient)
      if (owner !== undefined && owner !== doc.node) {
        throw new InputError(`${terminalText(nodeRecipientsPath(doc.node, doc.file))}: node ${doc.node}'s recipient ${recipient} is also node ${owner}'s: each could read the other's input; nothing published`, [
          'each node needs its own key: on a cloned machine, remove <state dir>/keys/node.key, run localpuppet node-key and put the new recipient in its NAME.pub',
          'an operator who must read every input goes in --recipient or --recipients-file',
        ])
      }

      owners.set(recipient, doc.node)
    }

    if (recipients === null) {
      if (marksSecrets(doc)) {
        throw new InputError(`${terminalText(doc.file)}: node ${doc.node}'s input marks secrets (!secret) but the node has no recipient (${terminalText(nodeRecipientsPath(doc.node, doc.file))}): it would be published in plain text`, [
          'run localpuppet node-key on the node and put the recipient it prints in that file',
        ])
      }

      sealed.push(doc)
      continue
    }

    const all = [...new Set([...recipients, ...(options.operators ?? [])])]
    const {MAX_AGE_RECIPIENTS, encryptDocument, sha256Hex} = await import('./age.js')
    // A node refuses a header with more stanzas than this: never publish one it cannot open.
    if (all.length > MAX_AGE_RECIPIENTS) {
      throw new InputError(`node ${doc.node}: ${all.length} recipients (${terminalText(nodeRecipientsPath(doc.node, doc.file))} and the operators'), more than the ${MAX_AGE_RECIPIENTS} a node accepts; nothing published`)
    }

    const bytes = await encryptDocument(doc.bytes, all)
    sealed.push({...doc, bytes, sha256: sha256Hex(bytes), encrypted: 'age', recipients: all})
  }

  return sealed
}

/**
 * Under the repository's lock, with its index: a plain node input is refused (65, one line
 * naming the node) where the repository (or this publish) already has encrypted ones, or
 * operator recipients were given, unless `allowPlain`: a node missing its NAME.pub would otherwise silently publish its
 * input, and any secret in it, for every reader of the web server.
 */
export function assertNoPlainAmongSealed(inputs: ReadonlyArray<Sealed<NodeDocument>>, indexNodes: Record<string, {encrypted?: string}> | undefined, options: SealOptions): void {
  if (options.allowPlain) return
  const plain = inputs.find((input) => input.encrypted === undefined)
  if (!plain) return
  // Operator recipients ask for encryption: a node without its own recipient would get none.
  if ((options.operators ?? []).length > 0) {
    throw new InputError(`node ${plain.node}: its input would be published in plain text (no ${terminalText(nodeRecipientsPath(plain.node, plain.file))}), though --recipient or --recipients-file asks for encrypted inputs; nothing published`, [
      "put the node's recipient in that file (localpuppet node-key prints it on the node)",
      'or pass --allow-plain-input to publish it in plain text anyway',
    ])
  }

  const encrypted = [...new Set([...inputs.filter((input) => input.encrypted !== undefined).map((input) => input.node), ...Object.entries(indexNodes ?? {}).filter(([, entry]) => entry.encrypted !== undefined).map(([node]) => node)])]
  if (encrypted.length === 0) return
  throw new InputError(
    `node ${plain.node}: its input would be published in plain text (no ${terminalText(nodeRecipientsPath(plain.node, plain.file))}) to a repository whose node inputs are encrypted (${encrypted.slice(0, 3).join(', ')}${encrypted.length > 3 ? ', ...' : ''}); nothing published`,
    ["put the node's recipient in that file (localpuppet node-key prints it on the node)", 'or pass --allow-plain-input to publish it in plain text anyway'],
  )
}

/**
 * Before the repository is touched: a layer marking a secret (`!secret`) is refused (65,
 * naming the file and key), whatever flag is given. Layers are stored in plain text and
 * shared by every node that names them, so the secret would be served in clear to
 * every reader of the web server and every mirror; a secret belongs in the node's own
 * input, which is encrypted to that node.
 */
export function refuseLayerSecrets(layers: ReadonlyArray<{name: string; file: string; bytes: Uint8Array}>): void {
  for (const layer of layers) {
    const path = layerSecretPath(layer.bytes, layer.file)
    if (path === null) continue
    throw new InputError(
      `${terminalText(layer.file)}: ${terminalText(path.join('.'))}: layer ${terminalText(layer.name)} marks a secret (!secret), but layers are published in plain text for every node; nothing published`,
      ["mark it in each node's own input (encrypted to the node by its NAME.pub) instead"],
    )
  }
}

/**
 * pack: a release's own layer (`layer.yaml` at its root) marking a secret is refused (65,
 * naming the file and key): the archive is published in plain text for every node, so
 * the secret would be served in clear. Secrets go in a node's own input.
 */
export async function refuseReleaseLayerSecrets(releases: ReadonlyArray<{release: string; path: string}>): Promise<void> {
  for (const {release, path} of releases) {
    const file = join(path, 'layer.yaml')
    let bytes: Buffer
    try {
      bytes = await readBoundedFile(file, {maxBytes: MAX_YAML_BYTES, label: `release layer ${file}`, error: (message) => new InputError(message), expected: 'a YAML file'})
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') continue
      if (error instanceof InputError) throw error
      throw describeFsError(error, `release layer ${file}`)
    }

    const secret = layerSecretPath(bytes, `${release}/layer.yaml`)
    if (secret === null) continue
    throw new InputError(`${terminalText(release)}/layer.yaml: ${terminalText(secret.join('.'))}: the release's layer marks a secret (!secret), but a release archive is published in plain text for every node; nothing packed`, [
      "mark it in each node's own input (encrypted to the node by its NAME.pub) instead",
    ])
  }
}
