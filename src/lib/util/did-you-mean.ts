/**
 * Edit distance counting a swap of two neighbouring letters as one edit (typos like `wbe`).
 * With `limit`, any distance of `limit` or more is returned as `limit`, found early: a hint
 * is asked of every misspelt name against every name a release has, so this runs millions
 * of times for a long input and must not build a matrix each time.
 */
export function editDistance(a: string, b: string, limit = Number.POSITIVE_INFINITY): number {
  if (Math.abs(a.length - b.length) >= limit) return limit
  let before = new Array<number>(b.length + 1).fill(0)
  let previous = Array.from({length: b.length + 1}, (_, j) => j)
  let current = new Array<number>(b.length + 1).fill(0)
  let smallestBefore = 0
  for (let i = 1; i <= a.length; i++) {
    current[0] = i
    let smallest = i
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1
      let distance = Math.min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) distance = Math.min(distance, before[j - 2] + 1)
      current[j] = distance
      if (distance < smallest) smallest = distance
    }

    // Every later row is at least the smaller of this row's smallest and the one before's plus one (a swap reaches two rows back): stop once that is out of reach.
    if (smallest >= limit && smallestBefore + 1 >= limit) return limit
    smallestBefore = smallest
    ;[before, previous, current] = [previous, current, before]
  }

  return Math.min(previous[b.length], limit)
}

/** The closest candidate within a third of the word's length, for "did you mean" hints. */
export function closest(word: string, candidates: Iterable<string>): string | undefined {
  let best: string | undefined
  let bestDistance = Math.max(1, Math.floor(word.length / 3)) + 1
  const lower = word.toLowerCase()
  for (const candidate of candidates) {
    const distance = editDistance(lower, candidate.toLowerCase(), bestDistance)
    if (distance < bestDistance) {
      best = candidate
      bestDistance = distance
    }
  }

  return best
}
