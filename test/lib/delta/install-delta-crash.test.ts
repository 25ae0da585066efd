import {readFile, readdir} from 'node:fs/promises'
import {join} from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'

import test, {type ExecutionContext} from 'ava'

import {parseRepositoryIndex} from '../../../src/lib/repository/repository-index.js'
import {readReleaseContent, treeDigest} from '../../../src/lib/tree/release-tree.js'
import {verifyInstalled} from '../../../src/lib/verify/verify-installed.js'
import {cli, startCli} from '../../helpers/cli.js'
import {DELTA, type DeltaSetup, deltaSetup, fetchTag} from '../../helpers/delta.js'
import {exists} from '../../helpers/temp.js'

// Kills `localpuppet fetch` (the built CLI) with SIGKILL while it installs a tag from
// objects beside an installed one: at each fault point, and at moments drawn at random.

const {OLD, NEW} = DELTA

/** 1.0.0 installed (from its archive); 1.0.1 differs in one manifest and 10% of the files. */
async function setup(t: ExecutionContext): Promise<DeltaSetup & {digest: string}> {
  const s = await deltaSetup(t, {perModule: 150, rewritten: 15})
  const first = await fetchTag(s, OLD)
  t.is(first.releases[0].delivery, 'archive')
  const index = parseRepositoryIndex(await readFile(join(s.repo, 'index.json')), 'index.json')
  return {...s, digest: index.apps.site.tags['1.0.1'].digest}
}

const fetchArgs = (s: DeltaSetup) => ['fetch', NEW, '--source', s.repo, '--module-dir', s.moduleDir, '--json']

/** The old tag whole, and the new one absent or whole: never a mix. */
async function checkConsistent(t: ExecutionContext, s: DeltaSetup & {digest: string}, label: string): Promise<boolean> {
  const present = await exists(join(s.moduleDir, NEW))
  if (present) {
    const {files, dirs} = await readReleaseContent(join(s.moduleDir, NEW), NEW)
    t.is(treeDigest(files, dirs), s.digest, `${label}: ${NEW} is visible but not the published tree`)
  }

  const old = (await verifyInstalled(s.moduleDir, [OLD])).results[0]
  t.true(old.ok, `${label}: ${OLD} changed: ${JSON.stringify(old)}`)
  return present
}

/** The next fetch completes the install; both tags verify and share the files 1.0.1 did not change. */
async function checkCompleted(t: ExecutionContext, s: DeltaSetup & {digest: string}, label: string): Promise<void> {
  const again = await cli(fetchArgs(s))
  t.is(again.exitCode, 0, `${label}: ${again.stderr}`)
  const {results} = await verifyInstalled(s.moduleDir, [])
  t.deepEqual(results.map((r) => [r.release, r.ok]), [[OLD, true], [NEW, true]], label)
  t.deepEqual((await readdir(join(s.moduleDir, '.localpuppet'))).filter((name) => name === 'staging' || name === 'install.lock'), [], label)
}

for (const point of ['install:extracting', 'install:before-commit', 'install:after-rename']) {
  test(`a fetch from objects killed at ${point} leaves 1.0.0 whole and 1.0.1 absent or whole; the next fetch completes it`, async (t) => {
    const s = await setup(t)
    const killed = await startCli(fetchArgs(s), {env: {LOCALPUPPET_TEST_FAULT: point}})
    t.is(killed.signal, 'SIGKILL', `not killed at ${point}: exit ${killed.exitCode}, ${String(killed.stderr)}`)
    t.is(await checkConsistent(t, s, point), point === 'install:after-rename')
    await checkCompleted(t, s, point)
  })
}

test('a fetch from objects killed with SIGKILL at moments drawn at random never leaves a mix of the two tags', async (t) => {
  const s = await setup(t)
  // How long one takes here, measured: the kills fall within it.
  const started = Date.now()
  const timed = await cli(fetchArgs(s))
  t.is(timed.exitCode, 0, timed.stderr)
  t.is(JSON.parse(timed.stdout).releases[0].delivery, 'objects')
  const span = Date.now() - started
  const seed = Number(process.env.DELTA_CRASH_SEED ?? Date.now() % 100_000)
  t.log(`seed ${seed} (DELTA_CRASH_SEED=${seed} repeats it); one fetch took ${span} ms`)
  let x = seed || 1
  const next = () => {
    x = (x * 48_271) % 2_147_483_647
    return x / 2_147_483_647
  }

  for (let round = 0; round < 6; round++) {
    // Back to 1.0.0 alone: the new tag removed (written back first: tags are read-only).
    const {execFileSync} = await import('node:child_process')
    execFileSync('chmod', ['-R', 'u+w', join(s.moduleDir, 'site')])
    execFileSync('rm', ['-rf', join(s.moduleDir, NEW), join(s.moduleDir, '.localpuppet', 'records', `${NEW}.json`)])
    execFileSync('chmod', ['-R', 'a-w', join(s.moduleDir, OLD)])
    const delay = Math.floor(next() * span)
    const child = startCli(fetchArgs(s))
    await sleep(delay)
    child.kill('SIGKILL')
    await child
    const label = `seed ${seed}, round ${round}, killed after ${delay} ms`
    await checkConsistent(t, s, label)
    await checkCompleted(t, s, label)
  }
})
