import {createHash, createHmac} from 'node:crypto'
import {inspect} from 'node:util'

/** How a secret is shown anywhere but where Puppet receives it: `{"localpuppet_secret": "hmac-sha256:<16 hex>"}`. */
export const SECRET_MARKER = 'localpuppet_secret'

/** The marker's value where no node key is at hand to key the digest (a publisher's machine): no digest at all. */
export const NO_SECRET_DIGEST = 'hidden'

/**
 * A value the operator marked secret (`!secret` in a node input). It prints redacted, with
 * a short digest to tell two apart, everywhere by default: JSON (run records, --json, the
 * run journal), String(), util.inspect and template literals. Its value is read only by
 * `reveal()`, where the run hands it to Puppet (encrypted to the node: secrets/).
 *
 * The digest is keyed (HMAC-SHA256 with a key derived from the node's own key, see
 * secrets/secret-digest.ts), so whoever reads a run record cannot test guesses of a short
 * password offline; until `useDigestKey` gives it a key it shows no digest (`hidden`).
 */
export class Secret {
  readonly #value: string
  #digest: string = NO_SECRET_DIGEST

  constructor(value: string, digestKey?: Uint8Array | null) {
    this.#value = value
    if (digestKey) this.useDigestKey(digestKey)
  }

  /** `hmac-sha256:` and the first 16 hex digits of the keyed digest (enough to see it changed); `hidden` without a key. */
  get digest(): string {
    return this.#digest
  }

  /** Keys the digest (in place: every document holding this secret shows the keyed digest from now on). */
  useDigestKey(key: Uint8Array): this {
    this.#digest = `hmac-sha256:${createHmac('sha256', key).update(this.#value).digest('hex').slice(0, 16)}`
    return this
  }

  /**
   * Whether a recorded marker's digest is this value's: `hmac-sha256:` with `key`, or the
   * unkeyed `sha256:` that runs recorded before digests were keyed (so their --replay still works).
   */
  matchesDigest(recorded: string, key: Uint8Array | null): boolean {
    if (recorded.startsWith('sha256:')) return recorded === `sha256:${createHash('sha256').update(this.#value).digest('hex').slice(0, 16)}`
    return key !== null && recorded === new Secret(this.#value, key).digest
  }

  reveal(): string {
    return this.#value
  }

  toJSON(): Record<string, string> {
    return {[SECRET_MARKER]: this.digest}
  }

  toString(): string {
    return this.#digest === NO_SECRET_DIGEST ? '[secret]' : `[secret ${this.#digest}]`
  }

  [inspect.custom](): string {
    return this.toString()
  }
}

/** The redacted form of a secret as a record holds it (JSON read back): `{localpuppet_secret: "hmac-sha256:..."}` (`sha256:...` in runs recorded before digests were keyed, `hidden` without a key). */
export function isSecretMarker(value: unknown): value is Record<typeof SECRET_MARKER, string> {
  return value !== null && typeof value === 'object' && !Array.isArray(value) && Object.keys(value).length === 1 && typeof (value as Record<string, unknown>)[SECRET_MARKER] === 'string'
}
