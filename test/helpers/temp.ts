import {lstat, mkdir, mkdtemp, rm, symlink, writeFile} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {dirname, join} from 'node:path'

import type {ExecutionContext} from 'ava'

/** A fresh temp directory removed when the test ends, pass or fail. */
export async function tempDir(t: ExecutionContext, prefix = 'localpuppet-test-'): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), prefix))
  t.teardown(() => rm(dir, {recursive: true, force: true}))
  return dir
}

/** A file tree described as an object: a string is a file, `{symlink}` a link, null an empty dir. */
export type Tree = {[path: string]: string | null | {symlink: string} | {mode: number; content: string}}

export async function writeTree(root: string, tree: Tree): Promise<void> {
  for (const [path, entry] of Object.entries(tree)) {
    const full = join(root, path)
    if (entry === null) {
      await mkdir(full, {recursive: true})
      continue
    }

    await mkdir(dirname(full), {recursive: true})
    if (typeof entry === 'string') await writeFile(full, entry)
    else if ('symlink' in entry) await symlink(entry.symlink, full)
    else await writeFile(full, entry.content, {mode: entry.mode})
  }
}

/** A module directory with releases: `{'foo/tags/1.0.0': ['dist/trunk']}` gives each a manifest.yaml and a class. */
export async function writeReleases(moduleDir: string, releases: Record<string, string[] | null>): Promise<void> {
  const tree: Tree = {}
  for (const [release, modulepath] of Object.entries(releases)) {
    const app = release.split('/')[0]
    tree[`${release}/${app}/manifests/init.pp`] = `class ${app.replaceAll('-', '_')} {}\n`
    if (modulepath !== null) tree[`${release}/manifest.yaml`] = `modulepath:\n${modulepath.map((entry) => `  - ${JSON.stringify(entry)}\n`).join('')}`
  }

  await writeTree(moduleDir, tree)
}

/** Whether anything (a dangling symlink included) is at the path. */
export async function exists(path: string): Promise<boolean> {
  return lstat(path).then(
    () => true,
    () => false,
  )
}
