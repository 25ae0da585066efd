import {InputError} from '../errors.js'
import {terminalText} from '../util/terminal-text.js'
import {isAgeArmored} from './age-format.js'

/**
 * A node input as the node reads it (fetched from the repository, or the copy it kept):
 * an age ciphertext is opened with the node's own key, plain text passes through. The
 * node keeps only the ciphertext on disk; the plain document lives in memory for the run.
 *
 * `encrypted`: the signed index says the input is encrypted: plain text then is refused
 * (65), so a repository cannot be made to downgrade a node to a plain input it did not
 * sign as such. Refusals: the key missing or unreadable (78, NodeKeyError), one others
 * can read (77), a ciphertext not for this key (another node's, or re-encrypted without
 * it) or one that does not authenticate (tampered): 65 naming the input, nothing opened.
 */
export async function openNodeDocument(
  text: string,
  label: string,
  stateDir: string,
  options: {encrypted?: boolean; /** What to say when it is not for this key (a run's kept secrets are not a published input). */ notForThisKey?: {why: string; hint: string}} = {},
): Promise<{text: string; encrypted: boolean}> {
  if (!isAgeArmored(text)) {
    if (options.encrypted) throw new InputError(`${terminalText(label)}: the signed index says it is encrypted, but it is not an age file; refused`)
    return {text, encrypted: false}
  }

  // The cipher is loaded only for an encrypted input.
  const [{decryptDocument}, {readNodeKey}] = await Promise.all([import('./age.js'), import('./node-key.js')])
  const key = await readNodeKey(stateDir)
  const opened = await decryptDocument(Buffer.from(text, 'latin1'), key.identity)
  if (!opened.ok) {
    const why =
      opened.why === 'not for this key'
        ? `not encrypted to this node's key (${key.recipient}): ${options.notForThisKey?.why ?? "another node's input, or published before this node was re-keyed"}`
        : opened.why === 'not age'
          ? 'not a readable age file'
          : opened.why === 'refused'
            ? `${opened.detail}, not opened`
            : 'does not authenticate (damaged or tampered)'
    throw new InputError(`${terminalText(label)}: encrypted input ${why}; refused, nothing applied`, [
      opened.why === 'not for this key' ? (options.notForThisKey?.hint ?? `publish the node's input again with its recipient (${key.recipient}) in NAME.pub`) : 'publish the input again',
    ])
  }

  const plain = opened.plain
  // As an input read from a file: UTF-8 only (publish refuses anything else).
  const decoded = new TextDecoder('utf-8', {fatal: true, ignoreBOM: false})
  let out: string
  try {
    out = decoded.decode(plain)
  } catch {
    throw new InputError(`${terminalText(label)}: encrypted input is not UTF-8 once opened; refused`)
  }

  return {text: out, encrypted: true}
}
