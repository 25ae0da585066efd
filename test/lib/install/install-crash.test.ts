import {lstat, mkdir, readdir} from 'node:fs/promises'
import {join} from 'node:path'

import test, {type ExecutionContext} from 'ava'

import {readInstallRecord} from '../../../src/lib/install/install-record.js'
import {packRelease} from '../../../src/lib/archive/pack.js'
import type {PackedIndex} from '../../../src/lib/archive/index-writer.js'
import {readReleaseTree, treeDigest} from '../../../src/lib/tree/release-tree.js'
import {verifyInstalled} from '../../../src/lib/verify/verify-installed.js'
import {cli, startCli} from '../../helpers/cli.js'
import {snapshot} from '../../helpers/snapshot.js'
import {type Tree, exists, tempDir, writeReleases, writeTree} from '../../helpers/temp.js'

// Kills `localpuppet install` (the built CLI, bin/run.js) with SIGKILL at each fault point
// (LOCALPUPPET_TEST_FAULT, src/lib/util/fault.ts) and checks what a power cut would leave.

const APP = 'foo/tags/1.0.0'
const DEP = 'dist/tags/2.0.1'
const DEEP = 'lib/tags/0.3.0'
const UNRELATED = 'other/tags/0.1.0'

/** The app, its dependency and the dependency's dependency, with enough files that extraction takes a while. */
async function sourceTree(dir: string): Promise<void> {
  await writeReleases(dir, {[APP]: [DEP], [DEP]: [DEEP], [DEEP]: null, [UNRELATED]: null})
  const tree: Tree = {}
  for (const release of [APP, DEP, DEEP]) {
    for (let i = 0; i < 40; i++) tree[`${release}/${release.split('/')[0]}/files/f${String(i).padStart(3, '0')}.txt`] = `${release} file ${i}\n`.repeat(200 + i)
  }

  tree[`${APP}/bin/hook.sh`] = {mode: 0o755, content: '#!/bin/sh\nexit 0\n'}
  await writeTree(dir, tree)
}


/** Every directory from root down, with its mode. */
async function dirModes(root: string): Promise<Array<[string, number]>> {
  const found: Array<[string, number]> = [[root, (await lstat(root)).mode & 0o7777]]
  for (const entry of await readdir(root, {withFileTypes: true})) if (entry.isDirectory()) found.push(...(await dirModes(join(root, entry.name))))
  return found
}

interface Setup {
  moduleDir: string
  archive: string
  index: PackedIndex
  /** The unrelated release and its record as installed before the crash. */
  unrelatedBefore: Record<string, string>
}

async function setup(t: ExecutionContext): Promise<Setup> {
  const root = await tempDir(t, 'localpuppet-crash-')
  const src = join(root, 'src')
  await sourceTree(src)
  const archive = join(root, 'foo-1.0.0.tar.gz')
  const {index} = await packRelease({moduleDir: src, ref: APP, output: archive})
  const unrelated = join(root, 'other-0.1.0.tar.gz')
  await packRelease({moduleDir: src, ref: UNRELATED, output: unrelated})
  const moduleDir = join(root, 'modules')
  await mkdir(moduleDir)
  const first = await cli(['install', unrelated, '--module-dir', moduleDir])
  t.is(first.exitCode, 0, first.stderr)
  return {moduleDir, archive, index, unrelatedBefore: await unrelatedState(moduleDir)}
}

async function unrelatedState(moduleDir: string): Promise<Record<string, string>> {
  return {
    ...(await snapshot(join(moduleDir, UNRELATED))),
    record: JSON.stringify(await readInstallRecord(moduleDir, UNRELATED)),
  }
}

/** Which of the archive's releases are in the module dir; each one there must be complete. */
async function checkConsistent(t: ExecutionContext, s: Setup): Promise<string[]> {
  const present: string[] = []
  for (const entry of s.index.releases) {
    const root = join(s.moduleDir, entry.release)
    if (!(await exists(root))) continue
    present.push(entry.release)
    // Never a half-written release: what is visible is exactly what the archive lists.
    t.is(treeDigest(await readReleaseTree(root, entry.release)), entry.digest, `${entry.release} is incomplete or altered`)
  }

  // Never an app without what it needs: a release present means every later one on the modulepath is too.
  const modulepath = s.index.modulepath
  for (const release of present) {
    for (const needed of modulepath.slice(modulepath.indexOf(release) + 1)) t.true(present.includes(needed), `${release} is visible without ${needed}`)
  }

  t.deepEqual(await unrelatedState(s.moduleDir), s.unrelatedBefore)
  const top = (await readdir(s.moduleDir)).sort()
  t.deepEqual(top, ['.localpuppet', ...new Set(['other', ...present.map((r) => r.split('/')[0])])].sort())
  return present
}

const FAULTS = [
  // After the first file is written into staging.
  {point: 'install:extracting', visible: [] as string[]},
  // Everything staged and synced, nothing renamed.
  {point: 'install:before-commit', visible: [] as string[]},
  // The first release (the deepest dependency) renamed into place, not yet read-only nor recorded.
  {point: 'install:after-rename', visible: [DEEP]},
]

for (const {point, visible} of FAULTS) {
  test(`install killed at ${point}: the module dir stays consistent, the next install completes it`, async (t) => {
    const s = await setup(t)
    const killed = await startCli(['install', s.archive, '--module-dir', s.moduleDir], {env: {LOCALPUPPET_TEST_FAULT: point}})
    t.is(killed.signal, 'SIGKILL', `not killed at ${point}: exit ${killed.exitCode}, ${killed.stderr}`)

    const present = await checkConsistent(t, s)
    t.deepEqual(present, visible)
    // The kill really came mid-install: it left its staging and its lock behind.
    const own = join(s.moduleDir, '.localpuppet')
    t.true((await readdir(join(own, 'staging'))).length > 0)
    t.true(await exists(join(own, 'install.lock')))

    const again = await cli(['install', s.archive, '--module-dir', s.moduleDir])
    t.is(again.exitCode, 0, again.stderr)
    for (const release of [DEEP, DEP, APP]) {
      t.true(again.stdout.includes(visible.includes(release) ? `unchanged ${release}` : `installed ${release}`), again.stdout)
    }

    t.deepEqual(await checkConsistent(t, s), [APP, DEP, DEEP])
    t.deepEqual((await readdir(own)).sort(), ['records'])

    // Recorded and read-only, as if the first install had never been interrupted.
    for (const entry of s.index.releases) {
      t.is((await readInstallRecord(s.moduleDir, entry.release))?.digest, entry.digest, entry.release)
      for (const [dir, mode] of await dirModes(join(s.moduleDir, entry.release))) t.is(mode, 0o555, dir)
    }

    const results = (await verifyInstalled(s.moduleDir, [])).results
    t.deepEqual(results.map((r) => [r.release, r.ok]), [[DEP, true], [APP, true], [DEEP, true], [UNRELATED, true]])
    const verify = await cli(['verify', '--module-dir', s.moduleDir])
    t.is(verify.exitCode, 0, verify.stdout + verify.stderr)

    const third = await cli(['install', s.archive, '--module-dir', s.moduleDir])
    t.is(third.exitCode, 0, third.stderr)
    t.notRegex(third.stdout, /^installed /m)
  })
}

test('without a fault the same install completes in one go (the fault variable is all that differs)', async (t) => {
  const s = await setup(t)
  const result = await cli(['install', s.archive, '--module-dir', s.moduleDir], {env: {LOCALPUPPET_TEST_FAULT: 'no-such-point'}})
  t.is(result.exitCode, 0, result.stderr)
  t.deepEqual(await checkConsistent(t, s), [APP, DEP, DEEP])
  t.deepEqual(await readdir(join(s.moduleDir, '.localpuppet')), ['records'])
})
