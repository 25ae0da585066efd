/**
 * How deeply a parsed JSON value nests, up to `limit` (a value past it answers limit + 1),
 * walked with a stack of its own: JSON.parse takes a document nested 200,000 deep in 2 MiB,
 * but JSON.stringify and every recursive walk after it overflow the call stack (RangeError:
 * 70, not the 65 a hostile document gets). Linear in the value's size.
 */
export function nestingDepth(value: unknown, limit: number): number {
  let deepest = 0
  const stack: Array<[unknown, number]> = [[value, 0]]
  while (stack.length > 0) {
    const [item, depth] = stack.pop()!
    if (item === null || typeof item !== 'object') continue
    if (depth + 1 > limit) return limit + 1
    deepest = Math.max(deepest, depth + 1)
    for (const child of Object.values(item)) if (child !== null && typeof child === 'object') stack.push([child, depth + 1])
  }

  return deepest
}
