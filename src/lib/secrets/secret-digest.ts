import {hkdfSync} from 'node:crypto'

import {Secret} from '../util/secret.js'

/** The domain-separation label of the digest key: the node's key is used for this and nothing else of ours. */
const DIGEST_LABEL = 'localpuppet secret digest v1'

/**
 * The key a node's secret digests are made with: HKDF-SHA256 of the node's age identity with
 * its own label. Stable for the node (replay and --if-changed compare digests across runs),
 * unknown to whoever reads a run record (no offline test of a guessed password). Null where
 * the node key cannot be read (a publisher's machine, a node without `node-key`): digests
 * then show as `hidden`; a run with secrets needs the key anyway (78, hiera-secrets.ts).
 */
export async function secretDigestKey(stateDir: string): Promise<Buffer | null> {
  const {readNodeKey} = await import('./node-key.js')
  try {
    return digestKeyOf((await readNodeKey(stateDir)).identity)
  } catch {
    return null
  }
}

/** The digest key of an age identity (`AGE-SECRET-KEY-1...`). */
export function digestKeyOf(identity: string): Buffer {
  return Buffer.from(hkdfSync('sha256', identity, '', DIGEST_LABEL, 32))
}

/** Keys every Secret found in these documents (in place), so each prints its node-keyed digest. */
export function keySecretDigests(key: Uint8Array | null, ...documents: unknown[]): void {
  if (key === null) return
  const seen = new Set<unknown>()
  const walk = (value: unknown): void => {
    if (value instanceof Secret) {
      value.useDigestKey(key)
      return
    }

    if (value === null || typeof value !== 'object' || seen.has(value)) return
    seen.add(value)
    for (const item of Array.isArray(value) ? value : Object.values(value)) walk(item)
  }

  for (const document of documents) walk(document)
}
