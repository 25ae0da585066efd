/**
 * What a document reads back as once dumped and parsed again: integers beyond 2^53 come
 * back exact, as BigInts of the digits written (localpuppet never rounds an input integer).
 */
export function exactIntegers<T>(value: T): T {
  if (typeof value === 'number' && Number.isInteger(value) && !Number.isSafeInteger(value) && Math.abs(value) < 1e21) return BigInt(String(value)) as T
  if (Array.isArray(value)) return value.map((item) => exactIntegers(item)) as T
  if (value !== null && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, exactIntegers(item)])) as T
  return value
}
