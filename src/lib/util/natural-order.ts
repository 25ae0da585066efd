/** A run of digits or a run of anything else: the chunks natural order compares. */
const CHUNK = /\d+|\D+/g

/**
 * Natural order for names such as node names: runs of digits compare by value, so db2
 * comes before db10 (plain text order puts db10 between db1 and db2). A total order: two
 * names that differ only in leading zeros (db01, db1) are told apart by plain text order,
 * so a sort gives one answer whatever order the names came in.
 */
export function compareNatural(a: string, b: string): number {
  const left = a.match(CHUNK) ?? []
  const right = b.match(CHUNK) ?? []
  for (let i = 0; i < Math.min(left.length, right.length); i++) {
    const x = left[i]
    const y = right[i]
    if (x === y) continue
    if (isDigits(x) && isDigits(y)) {
      const xv = x.replace(/^0+(?=\d)/, '')
      const yv = y.replace(/^0+(?=\d)/, '')
      if (xv.length !== yv.length) return xv.length - yv.length
      if (xv !== yv) return xv < yv ? -1 : 1
      continue
    }

    return x < y ? -1 : 1
  }

  if (left.length !== right.length) return left.length - right.length
  return a < b ? -1 : a > b ? 1 : 0
}

const isDigits = (chunk: string): boolean => chunk.charCodeAt(0) >= 48 && chunk.charCodeAt(0) <= 57
