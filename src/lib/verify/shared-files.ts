import {lstat} from 'node:fs/promises'
import {join, resolve} from 'node:path'

import {shellQuote} from '../util/shell-quote.js'

/**
 * The other installed tags that hold each of `paths` (relative to `release`) as the same
 * file (device and inode: a fetch links a file an installed tag already has, delta/), so a
 * change to one is a change to all: the tag's repair must remove those too. Only paths at
 * the same place in the other tag are looked at (a link is made to the same content, and
 * nearly always the same path); a path shared with no tag is left out.
 */
export async function sharedWithTags(root: string, release: string, paths: string[], installed: string[]): Promise<Record<string, string[]>> {
  const shared: Record<string, string[]> = {}
  for (const path of paths) {
    const mine = await lstat(join(root, release, path)).catch(() => null)
    if (mine === null || !mine.isFile() || mine.nlink < 2) continue
    for (const other of installed) {
      if (other === release) continue
      const theirs = await lstat(join(root, other, path)).catch(() => null)
      if (theirs !== null && theirs.dev === mine.dev && theirs.ino === mine.ino) (shared[path] ??= []).push(other)
    }
  }

  return shared
}

/**
 * How to put tags back as they were installed: remove them (their directories made writable
 * first, not their files, which tags not named may share) and fetch them again, which
 * downloads what no intact tag has. Pasted into a shell as printed: every word quoted, the
 * directories absolute (find and rm never read one as an option), and the fetch into the
 * module dir verified, not the configured one.
 */
export function repairRecipe(moduleDir: string, releases: string[]): string {
  const dirs = releases.map((release) => shellQuote(join(resolve(moduleDir), release))).join(' ')
  return `to repair: find ${dirs} -type d -exec chmod u+w {} + && rm -rf ${dirs}; then localpuppet fetch --module-dir ${shellQuote(resolve(moduleDir))} ${releases.map(shellQuote).join(' ')}`
}
