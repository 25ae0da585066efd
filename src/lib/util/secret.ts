import {createHash} from 'node:crypto'
import {inspect} from 'node:util'

/** How a secret is shown anywhere but where Puppet receives it: `{"localpuppet_secret": "sha256:<16 hex>"}`. */
export const SECRET_MARKER = 'localpuppet_secret'

/**
 * A value the operator marked secret (`!secret` in a node input). It prints redacted, with
 * a short digest to tell two apart, everywhere by default: JSON (run records, --json, the
 * run journal), String(), util.inspect and template literals. Its value is read only by
 * `reveal()`, where the run hands it to Puppet (encrypted to the node: secrets/).
 */
export class Secret {
  readonly #value: string
  /** `sha256:` and the first 16 hex digits of the value's sha256: enough to see it changed, not to search for it. */
  readonly digest: string

  constructor(value: string) {
    this.#value = value
    this.digest = `sha256:${createHash('sha256').update(value).digest('hex').slice(0, 16)}`
  }

  reveal(): string {
    return this.#value
  }

  toJSON(): Record<string, string> {
    return {[SECRET_MARKER]: this.digest}
  }

  toString(): string {
    return `[secret ${this.digest}]`
  }

  [inspect.custom](): string {
    return this.toString()
  }
}

/** The redacted form of a secret as a record holds it (JSON read back): `{localpuppet_secret: "sha256:..."}`. */
export function isSecretMarker(value: unknown): value is Record<typeof SECRET_MARKER, string> {
  return value !== null && typeof value === 'object' && !Array.isArray(value) && Object.keys(value).length === 1 && typeof (value as Record<string, unknown>)[SECRET_MARKER] === 'string'
}
