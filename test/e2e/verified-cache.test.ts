import {chmod, chown, mkdir, readFile, stat, utimes, writeFile} from 'node:fs/promises'
import {join} from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'

import test, {type ExecutionContext} from 'ava'

import {FIXTURES, cli} from '../helpers/cli.js'
import {tempDir} from '../helpers/temp.js'
import {statFile} from '../../src/lib/verify/verified-cache.js'

/*
 * The check before every run keeps the stat keys of what it read (inode, size, mode, owner,
 * mtime, ctime) in .localpuppet/verified/, and reads a file again only when its key moved.
 * What a user must still see: every changed byte refused, whatever was done to hide it.
 */

const DEMO = join(FIXTURES, 'demo')
const TAG = 'foo/tags/1.4.0'
const FILE = 'foo/manifests/init.pp'

/** The demo's foo 1.4.0 installed from an archive, older than the two seconds a key must settle. */
async function installed(t: ExecutionContext): Promise<{modules: string; plan: () => ReturnType<typeof cli>; cache: string}> {
  const dir = await tempDir(t)
  const archive = join(dir, 'foo.tar.gz')
  t.is((await cli(['pack', TAG, '--module-dir', join(DEMO, 'modules'), '-o', archive])).exitCode, 0)
  const modules = join(dir, 'modules')
  await mkdir(modules)
  t.is((await cli(['install', archive, '--module-dir', modules])).exitCode, 0)
  await sleep(2100)
  const input = join(dir, 'input.yaml')
  await writeFile(input, `app: ${TAG}\nclasses: [foo]\n`)
  return {modules, plan: () => cli(['plan', input, '--module-dir', modules, '--state-dir', join(dir, 'state')]), cache: join(modules, '.localpuppet', 'verified', `${encodeURIComponent(TAG)}.json`)}
}

/** Changes one byte and puts the size and mtime back: only the ctime (and the bytes) tell. */
async function flipByte(path: string): Promise<void> {
  const before = await stat(path)
  const bytes = await readFile(path)
  bytes[0] ^= 0x20
  await chmod(path, 0o644)
  await writeFile(path, bytes)
  await chmod(path, before.mode & 0o7777)
  await utimes(path, before.atime, before.mtime)
}

test('a verified tag is keyed, root-only; a byte changed under the same size and mtime is still refused, and the tag is fine again once restored', async (t) => {
  const {modules, plan, cache} = await installed(t)
  const first = await plan()
  t.is(first.exitCode, 0, first.stderr)
  t.is((await stat(cache)).mode & 0o777, 0o600)
  t.is((await stat(join(cache, '..'))).mode & 0o777, 0o700)
  const kept = JSON.parse(await readFile(cache, 'utf8')) as {release: string; keys: string[]}
  t.is(kept.release, TAG)
  t.true(kept.keys.length > 0 && kept.keys.every((key) => key !== ''), 'every file settled and keyed')
  t.is((await plan()).exitCode, 0)

  const path = join(modules, TAG, FILE)
  const original = await readFile(path)
  await flipByte(path)
  const refused = await plan()
  t.is(refused.exitCode, 65)
  t.regex(refused.stderr, new RegExp(`^localpuppet: ${TAG}/${FILE}: modified since install$`, 'm'))

  // Put back byte for byte (a new ctime: read again, and it matches).
  await flipByte(path)
  t.deepEqual(await readFile(path), original)
  t.is((await plan()).exitCode, 0)
})

test('a cache another user owns or can write is not believed, and verify reads every byte whatever the cache says', async (t) => {
  const {modules, plan, cache} = await installed(t)
  t.is((await plan()).exitCode, 0)
  const path = join(modules, TAG, FILE)
  await flipByte(path)
  // Settled (a key younger than two seconds is never believed), so that only the cache's
  // owner and mode decide below, however fast the refused runs go.
  await sleep(2100)
  // A forged cache: the keys the files have now, the changed one included.
  const kept = JSON.parse(await readFile(cache, 'utf8')) as {keys: string[]}
  const record = JSON.parse(await readFile(join(modules, '.localpuppet', 'records', `${TAG}.json`), 'utf8')) as {files: Array<{path: string}>}
  const forged = {...kept, keys: record.files.map((file) => statFile(join(modules, TAG, file.path))!.key)}
  await writeFile(cache, JSON.stringify(forged))
  for (const [uid, mode] of [[1000, 0o600], [0, 0o620], [0, 0o606]]) {
    await chown(cache, uid, 0)
    await chmod(cache, mode)
    const refused = await plan()
    t.is(refused.exitCode, 65, `cache uid ${uid} mode ${mode.toString(8)}`)
    t.regex(refused.stderr, /modified since install/)
  }

  // Root's own cache is believed by the check before a run (root trusts what root owns:
  // this is what makes the refusals above mean something); `verify` is the full check,
  // and reads every byte.
  await chown(cache, 0, 0)
  await chmod(cache, 0o600)
  t.is((await plan()).exitCode, 0, 'the forged keys are the files\' own')
  const verify = await cli(['verify', TAG, '--module-dir', modules])
  t.is(verify.exitCode, 65)
  t.is(verify.stdout, `MISMATCH  ${TAG}\n  modified  ${FILE}`)
})

test('a file others can write, let through by --allow-untrusted, is never keyed: it is read on every run', async (t) => {
  const {modules, cache} = await installed(t)
  const path = join(modules, TAG, FILE)
  await chmod(path, 0o666)
  await sleep(2100)
  const input = join(modules, '..', 'input.yaml')
  const plan = await cli(['plan', input, '--module-dir', modules, '--state-dir', join(modules, '..', 'state'), '--allow-untrusted'])
  t.is(plan.exitCode, 0, plan.stderr)
  t.regex(plan.stderr, /not trusted/)
  const record = JSON.parse(await readFile(join(modules, '.localpuppet', 'records', `${TAG}.json`), 'utf8')) as {files: Array<{path: string}>}
  const {keys} = JSON.parse(await readFile(cache, 'utf8')) as {keys: string[]}
  const at = record.files.findIndex((file) => file.path === FILE)
  t.is(keys[at], '', 'the writable file has no key')
  t.true(keys.filter((_, i) => i !== at).every((key) => key !== ''), 'the others have theirs')
})
