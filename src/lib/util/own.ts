/**
 * `record[key]` when the record has it as its own entry, else undefined. Records parsed
 * from JSON inherit Object.prototype: a name such as `constructor` or `toString`, which
 * are valid app, channel and node names, would otherwise find a function where no entry is.
 */
export function own<T>(record: Record<string, T> | undefined, key: string): T | undefined {
  return record !== undefined && Object.hasOwn(record, key) ? record[key] : undefined
}
