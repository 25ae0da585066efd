import {execFileSync} from 'node:child_process'
import {mkdir} from 'node:fs/promises'
import {join} from 'node:path'

import type {ExecutionContext} from 'ava'

import {packRelease} from '../../src/lib/archive/pack.js'
import {publishArchives} from '../../src/lib/repository/publish.js'
import {fetchReleases} from '../../src/lib/source/fetch.js'
import {type Tree, tempDir, writeReleases, writeTree} from './temp.js'

export const DELTA = {OLD: 'site/tags/1.0.0', NEW: 'site/tags/1.0.1', CHANGED: 'ntp/manifests/init.pp'}

/**
 * Three modules of `perModule` files each, one executable and an empty directory; the
 * manifest CHANGED holds `changed`, and the first `rewritten` files of each module say `mark`.
 */
function siteTree(release: string, changed: string, perModule: number, rewritten: number, mark: string): Tree {
  const tree: Tree = {}
  for (const module of ['apache', 'ntp', 'stdlib']) {
    for (let i = 0; i < perModule; i++) tree[`${release}/${module}/files/f${String(i).padStart(3, '0')}.txt`] = `${module} ${i} ${i < rewritten ? mark : ''}\n`.repeat(50 + i)
    tree[`${release}/${module}/manifests/init.pp`] = `class ${module} {\n  notify { 'hello': }\n}\n`
  }

  tree[`${release}/${DELTA.CHANGED}`] = changed
  tree[`${release}/stdlib/bin/tool.sh`] = {mode: 0o755, content: '#!/bin/sh\nexit 0\n'}
  tree[`${release}/apache/files/empty`] = null
  return tree
}

export interface DeltaSetup {
  dir: string
  repo: string
  moduleDir: string
  archives: {old: string; new: string}
}

/**
 * site 1.0.0 and 1.0.1 (one line of one manifest apart, and `rewritten` more files per
 * module) packed and published into a directory repository, and an empty module directory.
 */
export async function deltaSetup(t: ExecutionContext, options: {perModule?: number; rewritten?: number} = {}): Promise<DeltaSetup> {
  const {perModule = 30, rewritten = 0} = options
  const dir = await tempDir(t, 'localpuppet-delta-')
  // Installed tags are read-only: given write back before the temp dir goes.
  t.teardown(() => {
    execFileSync('chmod', ['-R', 'u+w', dir])
  })
  const src = join(dir, 'src')
  await writeReleases(src, {[DELTA.OLD]: null, [DELTA.NEW]: null})
  await writeTree(src, {
    ...siteTree(DELTA.OLD, "class ntp {\n  notify { 'one': }\n}\n", perModule, rewritten, 'old'),
    ...siteTree(DELTA.NEW, "class ntp {\n  notify { 'two': }\n}\n", perModule, rewritten, 'new'),
  })
  const archives = {old: join(dir, 'site-1.0.0.tar.gz'), new: join(dir, 'site-1.0.1.tar.gz')}
  await packRelease({moduleDir: src, ref: DELTA.OLD, output: archives.old})
  await packRelease({moduleDir: src, ref: DELTA.NEW, output: archives.new})
  const repo = join(dir, 'repo')
  await publishArchives({repo, archives: [archives.old, archives.new]})
  const moduleDir = join(dir, 'modules')
  await mkdir(moduleDir)
  return {dir, repo, moduleDir, archives}
}

/** fetch of one reference from the setup's repository (unsigned, a directory), as a library call. */
export function fetchTag(s: DeltaSetup, ref: string) {
  return fetchReleases(s.repo, [ref], {moduleDir: s.moduleDir, trust: [], trustDir: null})
}
