import {randomBytes} from 'node:crypto'

/**
 * JSON.stringify that writes a BigInt (an input integer beyond 2^53, kept exact) as the
 * number it is, with all its digits, instead of throwing.
 */
export function stringifyJson(value: unknown, indent?: number): string {
  let marker: string | undefined
  const text = JSON.stringify(
    value,
    function (this: Record<string, unknown>, key: string, item: unknown) {
      // The holder's own value: BigInt's toJSON (see allowBigIntInJson) has already run on `item`.
      const original = this[key]
      if (typeof original !== 'bigint') return item
      marker ??= `bigint-${randomBytes(8).toString('hex')}:`
      return `${marker}${original.toString()}`
    },
    indent,
  )
  return marker === undefined ? text : text.replaceAll(new RegExp(`"${marker}(-?\\d+)"`, 'g'), '$1')
}

/**
 * Plain JSON.stringify throws on a BigInt. Where a record travels through code that uses
 * it (IPC to a detached run, the finish hook, oclif's --json), the digits go as a string
 * instead of a crash; stringifyJson writes them as a number.
 */
export function allowBigIntInJson(): void {
  if (Object.hasOwn(BigInt.prototype, 'toJSON')) return
  Object.defineProperty(BigInt.prototype, 'toJSON', {
    value(this: bigint) {
      return this.toString()
    },
    configurable: true,
    writable: true,
  })
}

/** A JSON or YAML mapping: an object that is neither null nor an array. */
export function isMapping(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value)
}
