import {execFileSync} from 'node:child_process'
import {chmod, mkdir, readFile, readdir, stat, symlink, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import test from 'ava'

import {decryptDocument, encryptDocument} from '../../../src/lib/secrets/age.js'
import {NodeKeyError, ensureNodeKey, nodeKeyPath, readNodeKey} from '../../../src/lib/secrets/node-key.js'
import {UntrustedPathError} from '../../../src/lib/errors.js'
import {tempDir} from '../../helpers/temp.js'

test('node-key makes the key once, 0600 in a 0700 directory, and a second call prints the same recipient without overwriting', async (t) => {
  const state = join(await tempDir(t), 'state')
  const first = await ensureNodeKey(state)
  t.true(first.created)
  t.regex(first.recipient, /^age1[a-z0-9]{58}$/)
  const path = nodeKeyPath(state)
  t.is((await stat(path)).mode & 0o777, 0o600)
  t.is((await stat(join(state, 'keys'))).mode & 0o777, 0o700)
  const bytes = await readFile(path)
  const second = await ensureNodeKey(state)
  t.false(second.created)
  t.is(second.recipient, first.recipient)
  t.deepEqual(await readFile(path), bytes)
})

test("what is encrypted to the node's recipient, Debian's age reads with the node's key", async (t) => {
  const state = join(await tempDir(t), 'state')
  const {recipient} = await ensureNodeKey(state)
  const sealed = await encryptDocument(Buffer.from('classes: {}\n'), [recipient])
  const file = join(state, 'x.age')
  await writeFile(file, sealed)
  t.is(execFileSync('age', ['--decrypt', '-i', nodeKeyPath(state), file], {encoding: 'utf8'}), 'classes: {}\n')
  const {identity} = await readNodeKey(state)
  t.deepEqual(await decryptDocument(sealed, identity), {ok: true, plain: Buffer.from('classes: {}\n')})
})

test('a missing key is 78 naming it and the fix', async (t) => {
  const state = await tempDir(t)
  const error = await t.throwsAsync(readNodeKey(state), {instanceOf: NodeKeyError})
  t.is(error?.exitCode, 78)
  t.regex(error!.message, /node key .*keys\/node\.key: missing/)
  t.regex(error!.suggestions.join('\n'), /localpuppet node-key/)
})

test('a key readable by others is refused (77), and so is one through a symbolic link (78) or one holding no identity (78)', async (t) => {
  const state = await tempDir(t)
  await ensureNodeKey(state)
  await chmod(nodeKeyPath(state), 0o644)
  const open = await t.throwsAsync(readNodeKey(state), {instanceOf: UntrustedPathError})
  t.regex(open!.message, /mode 0644 lets others read it/)

  const linked = await tempDir(t)
  await mkdir(join(linked, 'keys'), {mode: 0o700})
  await symlink(nodeKeyPath(state), nodeKeyPath(linked))
  const link = await t.throwsAsync(readNodeKey(linked), {instanceOf: NodeKeyError})
  t.regex(link!.message, /a symbolic link/)

  const garbage = await tempDir(t)
  await mkdir(join(garbage, 'keys'), {mode: 0o700})
  await writeFile(nodeKeyPath(garbage), '# nothing here\n', {mode: 0o600})
  const none = await t.throwsAsync(readNodeKey(garbage), {instanceOf: NodeKeyError})
  t.regex(none!.message, /holds no age identity/)
})

test('a key directory others can write is refused (77) before any key is made in it', async (t) => {
  const state = await tempDir(t)
  await mkdir(join(state, 'keys'), {mode: 0o700})
  await chmod(join(state, 'keys'), 0o777)
  const error = await t.throwsAsync(ensureNodeKey(state), {instanceOf: UntrustedPathError})
  t.regex(error!.message, /keys/)
  await t.throwsAsync(stat(nodeKeyPath(state)))
})

/** A state dir with a node key and a run R1 whose secrets (db::password: hunter2) were kept for it. */
async function runWithSecrets(t: import('ava').ExecutionContext): Promise<{state: string; run: string}> {
  const {writeSecretFiles} = await import('../../../src/lib/secrets/hiera-secrets.js')
  const {Secret} = await import('../../../src/lib/util/secret.js')
  const state = await tempDir(t)
  await ensureNodeKey(state)
  const run = join(state, 'runs', 'R1')
  await mkdir(run, {recursive: true, mode: 0o700})
  await writeSecretFiles(run, state, {'db::password': new Secret('hunter2')}, ['/bin/false'])
  return {state, run}
}

test("node-key --hiera opens only a run's secrets.age in the state dir, and only one encrypted to this node", async (t) => {
  const {hieraDataOfRun, secretRunFiles} = await import('../../../src/lib/secrets/hiera-secrets.js')
  const {state, run} = await runWithSecrets(t)
  t.deepEqual(await hieraDataOfRun(secretRunFiles(run).sealed, state), {'db::password': 'hunter2'})
  t.false((await readFile(secretRunFiles(run).sealed, 'utf8')).includes('hunter2'))
  t.false((await readFile(secretRunFiles(run).hiera, 'utf8')).includes('hunter2'))

  const outside = join(state, 'secrets.age')
  await writeFile(outside, await readFile(secretRunFiles(run).sealed))
  const usage = await t.throwsAsync(hieraDataOfRun(outside, state))
  t.is((usage as {exitCode?: number}).exitCode, 64)

  // Another node's key: the same file is not for it (65).
  const other = await tempDir(t)
  await ensureNodeKey(other)
  await mkdir(join(other, 'runs', 'R1'), {recursive: true, mode: 0o700})
  await writeFile(join(other, 'runs', 'R1', 'secrets.age'), await readFile(secretRunFiles(run).sealed))
  const foreign = await t.throwsAsync(hieraDataOfRun(join(other, 'runs', 'R1', 'secrets.age'), other))
  t.is((foreign as {exitCode?: number}).exitCode, 65)
  t.regex(foreign!.message, /not encrypted to this node's key/)
})

test("a run's secrets.age that opens but holds no JSON is refused (65) without quoting what it holds", async (t) => {
  const {openRunSecrets, secretRunFiles} = await import('../../../src/lib/secrets/hiera-secrets.js')
  const state = await tempDir(t)
  const {recipient} = await ensureNodeKey(state)
  const run = join(state, 'runs', 'R1')
  await mkdir(run, {recursive: true, mode: 0o700})
  await writeFile(secretRunFiles(run).sealed, await encryptDocument(Buffer.from('hunter2 is not JSON'), [recipient]), {mode: 0o600})
  const error = await t.throwsAsync(openRunSecrets(secretRunFiles(run).sealed, state))
  t.is((error as {exitCode?: number}).exitCode, 65)
  t.is(error!.message, `secrets ${secretRunFiles(run).sealed}: not what a run writes`)
})

test('an empty node.key (a node-key stopped before it wrote the key) is 78 saying to remove it, not to run node-key, which would stop at it again; a key is made whole beside it and linked into place', async (t) => {
  const state = join(await tempDir(t), 'state')
  await mkdir(join(state, 'keys'), {recursive: true, mode: 0o700})
  await writeFile(nodeKeyPath(state), '', {mode: 0o600})
  const error = await t.throwsAsync(ensureNodeKey(state), {instanceOf: NodeKeyError})
  t.is(error!.exitCode, 78)
  t.is(error!.message, `node key ${nodeKeyPath(state)}: empty (a node-key stopped while writing it); no key was ever in it`)
  t.deepEqual(error!.suggestions, [`remove it and run localpuppet node-key again: rm ${nodeKeyPath(state)}`])
  const fresh = join(await tempDir(t), 'state')
  await ensureNodeKey(fresh)
  t.deepEqual(await readdir(join(fresh, 'keys')), ['node.key'])
})

test("a run's secrets kept before the node was re-keyed are refused (65) saying so, with a hint that works (not: publish again)", async (t) => {
  const {openRunSecrets, secretRunFiles} = await import('../../../src/lib/secrets/hiera-secrets.js')
  const {rm} = await import('node:fs/promises')
  const {state, run} = await runWithSecrets(t)
  await rm(nodeKeyPath(state))
  const {recipient} = await ensureNodeKey(state)
  const error = await t.throwsAsync(openRunSecrets(secretRunFiles(run).sealed, state))
  t.is((error as {exitCode?: number}).exitCode, 65)
  t.is(error!.message, `secrets ${secretRunFiles(run).sealed}: encrypted input not encrypted to this node's key (${recipient}): that run kept them for the key the node had then (re-keyed since); refused, nothing applied`)
  t.deepEqual((error as {suggestions?: string[]}).suggestions, ["that run cannot be replayed with this key: apply the node's current input instead"])
})
