import {chmod, chown, mkdir, rename, rm, symlink, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import test from 'ava'
import {execa} from 'execa'

import {readReleaseContent, treeDigest} from '../../../src/lib/tree/release-tree.js'
import {preinstScript} from '../../../src/lib/deb/preinst.js'
import {asHostile, hostileUid} from '../../helpers/hostile-user.js'
import {type Tree, tempDir, writeTree} from '../../helpers/temp.js'

/** A tag as `install` leaves it (files, record) and the preinst of a package of `content`. */
async function setup(t: Parameters<typeof tempDir>[0], installed: Tree | null, content: Tree, at?: string) {
  const dir = await tempDir(t)
  const modules = at ?? join(dir, "it's modules")
  const release = 'web/tags/1.0.0'
  const source = join(dir, 'source')
  await writeTree(source, content)
  const {files, dirs} = await readReleaseContent(source, release)
  const recordFile = join(modules, '.localpuppet/records', `${release}.json`)
  if (installed) {
    await writeTree(join(modules, release), installed)
    const tree = await readReleaseContent(join(modules, release), release)
    await mkdir(join(recordFile, '..'), {recursive: true})
    await writeFile(recordFile, JSON.stringify({format: 1, release, digest: treeDigest(tree.files, tree.dirs), files: tree.files, dirs: tree.dirs}) + '\n')
  }

  const script = join(dir, 'preinst')
  await writeFile(script, preinstScript({package: 'localpuppet-web-1.0.0', release, digest: treeDigest(files, dirs), moduleDir: modules, releaseDir: join(modules, release), recordFile, files, dirs}))
  await chmod(script, 0o755)
  const run = (action = 'install') => execa(script, [action], {reject: false})
  return {modules, release, run}
}

const CONTENT: Tree = {'web/manifests/init.pp': 'class web {}\n', 'files/a b\\c.txt': 'odd name\n', "web/files/empty 'dir'": null}

test('nothing installed, or the same content untouched: the package may install, however often the script runs', async (t) => {
  for (const installed of [null, CONTENT]) {
    const {run} = await setup(t, installed, CONTENT)
    for (const action of ['install', 'install', 'upgrade', 'abort-upgrade']) {
      const result = await run(action)
      t.is(result.exitCode, 0, result.stderr)
      t.is(result.stderr, '')
    }
  }
})

test('other content, a modified tag, an added file: refused every time, one line naming the release', async (t) => {
  const cases: Array<[Record<string, string>, RegExp]> = [
    [{'web/manifests/init.pp': 'class web { notify { x: } }\n'}, /already installed with other content \(sha256:\w+; this package has sha256:\w+\); tags are immutable/],
    [{...CONTENT, 'extra.pp': 'x'}, /already installed with other content/],
  ]
  for (const [installed, message] of cases) {
    const {run} = await setup(t, installed, CONTENT)
    for (const action of ['install', 'install', 'upgrade']) {
      const result = await run(action)
      t.is(result.exitCode, 1)
      t.regex(result.stderr, /^localpuppet-web-1\.0\.0: web\/tags\/1\.0\.0: /)
      t.regex(result.stderr, message)
    }
  }

  // The record says this content, the files say otherwise: modified after install.
  const {modules, release, run} = await setup(t, CONTENT, CONTENT)
  await writeFile(join(modules, release, 'web/manifests/init.pp'), 'class web { tampered }\n')
  const modified = await run('install')
  t.is(modified.exitCode, 1)
  t.regex(modified.stderr, /was modified after it was installed; localpuppet verify web\/tags\/1\.0\.0 lists the changes/)
  await writeFile(join(modules, release, 'web/manifests/init.pp'), 'class web {}\n')
  await writeFile(join(modules, release, 'added.pp'), '')
  t.regex((await run('install')).stderr, /files added or removed/)

  const emptied = await setup(t, CONTENT, CONTENT)
  await rm(join(emptied.modules, emptied.release, "web/files/empty 'dir'"), {recursive: true})
  await mkdir(join(emptied.modules, emptied.release, 'web/files/another'))
  t.regex((await emptied.run('install')).stderr, /was modified after it was installed \(empty directory web\/files\/empty 'dir'\)/)
})

test('a directory without a record is refused on install', async (t) => {
  const {modules, release, run} = await setup(t, null, CONTENT)
  await writeTree(join(modules, release), CONTENT)
  const result = await run('install')
  t.is(result.exitCode, 1)
  t.regex(result.stderr, /exists without a localpuppet install record/)
})

test('a link where dpkg would write, or a directory group or others can write, is refused on install and upgrade alike, one line naming it', async (t) => {
  const cases: Array<[string, (modules: string, release: string) => Promise<void>, (modules: string, release: string) => RegExp]> = [
    ['the tag a link', async (modules, release) => {
      await rename(join(modules, release), join(modules, 'elsewhere'))
      await symlink(join(modules, 'elsewhere'), join(modules, release))
    }, (modules, release) => new RegExp(`${join(modules, release)} is a symbolic link: dpkg would write where it leads`)],
    ['<app>/tags a link', async (modules) => {
      await rename(join(modules, 'web/tags'), join(modules, 'elsewhere'))
      await symlink(join(modules, 'elsewhere'), join(modules, 'web/tags'))
    }, (modules) => new RegExp(`${join(modules, 'web/tags')} is a symbolic link`)],
    ['a link inside the tag', async (modules, release) => {
      await chmod(join(modules, release, 'web'), 0o755)
      await symlink('/etc', join(modules, release, 'web', 'etc'))
    }, (modules, release) => new RegExp(`${join(modules, release, 'web', 'etc')} is a link, or owned or writable by another user`)],
    ['the tag writable by others', async (modules, release) => chmod(join(modules, release), 0o777), (modules, release) => new RegExp(`${join(modules, release)} is writable by group or others; check what it holds, then: chmod go-w`)],
    ['<app> writable by the group', async (modules) => chmod(join(modules, 'web'), 0o775), (modules) => new RegExp(`${join(modules, 'web')} is writable by group or others`)],
    ['the record\'s directory writable by others', async (modules) => chmod(join(modules, '.localpuppet/records/web/tags'), 0o777), (modules) => new RegExp(`${join(modules, '.localpuppet/records/web/tags')} is writable by group or others`)],
  ]
  for (const [name, change, message] of cases) {
    const {modules, release, run} = await setup(t, CONTENT, CONTENT)
    t.is((await run('upgrade')).exitCode, 0, `${name}: fine before`)
    await change(modules, release)
    for (const action of ['install', 'upgrade']) {
      const result = await run(action)
      t.is(result.exitCode, 1, `${name}, ${action}: ${result.stderr}`)
      t.is(result.stderr.trimEnd().split('\n').length, 1, result.stderr)
      t.regex(result.stderr, new RegExp(`^localpuppet-web-1\\.0\\.0: web/tags/1\\.0\\.0: ${message(modules, release).source}`), `${name}, ${action}`)
    }
  }
})

// dpkg walks the module directory's path as the kernel does: whoever owns a directory on the
// way can swap what follows for a link (the module directory itself may be a link), and
// root's files then land in a directory of their choosing.
test("the directories leading to the module directory must be root's (a root-owned sticky one, as /tmp, is fine), as localpuppet's own trust rule says: else refused, one line naming it", async (t) => {
  const refusedWith = async (run: (action?: string) => Promise<{exitCode?: number; stderr: string}>, pattern: string, what: string) => {
    for (const action of ['install', 'upgrade']) {
      const result = await run(action)
      t.is(result.exitCode, 1, `${what}, ${action}: ${result.stderr}`)
      t.is(result.stderr.trimEnd().split('\n').length, 1, result.stderr)
      t.true(result.stderr.startsWith(`localpuppet-web-1.0.0: web/tags/1.0.0: ${pattern}`), `${what}, ${action}: ${result.stderr}`)
    }
  }

  const {modules, run} = await setup(t, CONTENT, CONTENT)
  const parent = join(modules, '..')
  t.is((await run('install')).exitCode, 0, 'fine before')
  await chmod(parent, 0o777)
  await refusedWith(run, `${parent} (on the way to the module directory) is writable by group or others`, 'parent writable by others')
  await chmod(parent, 0o1777)
  t.is((await run('install')).exitCode, 0, 'a root-owned sticky parent, as /tmp')
  await chmod(parent, 0o700)

  // The module directory a link (root's, in a directory of root's) to one elsewhere: fine; to one in a directory others can write: refused.
  const inner = join(parent, 'real', 'inner')
  await mkdir(inner, {recursive: true})
  await rename(modules, join(inner, 'modules'))
  await symlink(join(inner, 'modules'), modules)
  t.is((await run('install')).exitCode, 0, "the module directory a link of root's")
  await chmod(inner, 0o757)
  await refusedWith(run, `${inner} (on the way to the module directory) is writable by group or others`, "the link's target in a directory others can write")

  const hostile = hostileUid()
  if (hostile === null) return
  // Another user owns the module directory's parent, and swaps the module directory for a link to a root-owned directory they chose.
  const theirs = join(parent, 'theirs')
  await mkdir(theirs)
  await chmod(parent, 0o755)
  const chosen = join(parent, 'chosen')
  await mkdir(chosen, {mode: 0o755})
  const staged = await setup(t, CONTENT, CONTENT, join(theirs, 'modules'))
  await chown(theirs, hostile, hostile)
  t.is((await staged.run('install')).exitCode === 0, false, 'refused before any swap')
  asHostile(`mv '${join(theirs, 'modules')}' '${join(theirs, 'old')}' && ln -s '${chosen}' '${join(theirs, 'modules')}'`)
  await refusedWith(staged.run, `${theirs} (on the way to the module directory) is owned by uid ${hostile}, not root`, "the parent another user's, the module directory their link")
})
