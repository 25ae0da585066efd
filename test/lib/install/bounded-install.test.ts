import {execFileSync, spawnSync} from 'node:child_process'
import {chmod, chown, mkdir, readFile, readdir, writeFile} from 'node:fs/promises'
import {join} from 'node:path'
import {gunzipSync, gzipSync} from 'node:zlib'

import test, {type ExecutionContext} from 'ava'
import {Header, Pax} from 'tar'

import {installGitTag} from '../../../src/lib/install/install-git.js'
import {installArchive} from '../../../src/lib/install/install-archive.js'
import {openArchive} from '../../../src/lib/install/open-archive.js'
import {packRelease} from '../../../src/lib/archive/pack.js'
import {type ReleaseIndex, RELEASE_INDEX} from '../../../src/lib/archive/release-index.js'
import {treeDigest} from '../../../src/lib/tree/release-tree.js'
import {verifyRelease} from '../../../src/lib/verify/verify.js'
import {LocalpuppetError} from '../../../src/lib/errors.js'
import {REPO} from '../../helpers/cli.js'
import {exists, tempDir, writeReleases, writeTree} from '../../helpers/temp.js'

const APP = 'foo/tags/1.0.0'
const isRoot = process.getuid?.() === 0

async function packed(t: ExecutionContext, tree: Record<string, string | null> = {}): Promise<{src: string; archive: string; dir: string}> {
  const dir = await tempDir(t, 'localpuppet-bounded-')
  const src = join(dir, 'src')
  await writeReleases(src, {[APP]: null})
  await writeTree(src, tree)
  const archive = join(dir, 'foo.tar.gz')
  await packRelease({moduleDir: src, ref: APP, output: archive})
  return {src, archive, dir}
}

async function install(archive: string, moduleDir: string) {
  const {stream, label} = await openArchive(archive)
  return installArchive(stream, label, {moduleDir, trustDir: null})
}

/** A .tar.gz of files as given (pax headers for long paths), ending with the end marker. */
function tarGz(entries: Array<{path: string; data: Buffer}>): Buffer {
  const blocks: Buffer[] = []
  for (const {path, data} of entries) {
    const header = new Header({path, type: 'File', mode: 0o644, size: data.length, mtime: new Date(0)})
    if (header.encode()) blocks.push(new Pax({path, size: data.length}).encode())
    blocks.push(header.block!, data, Buffer.alloc((512 - (data.length % 512)) % 512))
  }

  return gzipSync(Buffer.concat([...blocks, Buffer.alloc(1024)]))
}

/** Installs in a process of its own: exit code, message and peak memory. */
function installPeak(archive: string, moduleDir: string): {exitCode: number; message: string; maxRssMb: number} {
  const out = execFileSync('node', ['--import=tsx/esm', join(REPO, 'test/helpers/install-peak.ts'), archive, moduleDir], {cwd: REPO, encoding: 'utf8', timeout: 300_000})
  return JSON.parse(out)
}

/** gzip members of `mb` MiB of zeros each, `count` times: what a zip bomb appends. */
function zeroMembers(mb: number, count: number): Buffer {
  const member = gzipSync(Buffer.alloc(mb * 1024 * 1024), {level: 9})
  return Buffer.concat(Array.from({length: count}, () => member))
}

async function leftClean(t: ExecutionContext, moduleDir: string): Promise<void> {
  t.false(await exists(join(moduleDir, APP)), 'the tag became visible')
  const own = join(moduleDir, '.localpuppet')
  if (await exists(own)) t.deepEqual((await readdir(own)).filter((name) => name !== 'records'), [], 'staging or lock left behind')
  if (await exists(join(own, 'records', 'foo'))) t.deepEqual(await readdir(join(own, 'records', 'foo', 'tags')), [], 'a record without its tag')
}

for (const [what, trailer] of [
  ['100 KB of gzipped zeros (100 MiB unpacked)', () => zeroMembers(100, 1)],
  ['1 MB of gzipped zeros (1 GiB unpacked)', () => zeroMembers(100, 10)],
] as const) {
  test(`${what} appended to a valid archive is refused at once, in little memory`, async (t) => {
    const {archive, dir} = await packed(t)
    const hostile = join(dir, 'trailing.tar.gz')
    await writeFile(hostile, Buffer.concat([await readFile(archive), trailer()]))
    const moduleDir = join(dir, 'modules')
    await mkdir(moduleDir)
    const result = installPeak(hostile, moduleDir)
    t.is(result.exitCode, 65, result.message)
    t.regex(result.message, /after the end of the archive/)
    t.true(result.maxRssMb < 300, `peak ${result.maxRssMb} MB`)
    await leftClean(t, moduleDir)
  })
}

test('GNU tar record padding (zeros after the end marker) is accepted', async (t) => {
  const {archive, dir} = await packed(t)
  const tar = gunzipSync(await readFile(archive))
  const padded = join(dir, 'padded.tar.gz')
  await writeFile(padded, gzipSync(Buffer.concat([tar, Buffer.alloc(10240 - (tar.length % 10240))])))
  const moduleDir = join(dir, 'modules')
  await mkdir(moduleDir)
  t.deepEqual((await install(padded, moduleDir)).installed, [APP])
})

test('an entry of 2 GiB that release.json lists as 10 bytes is refused at its header, in little memory', async (t) => {
  const {dir} = await packed(t)
  const data = Buffer.from('0123456789')
  const files = [{path: 'big.bin', size: 10, executable: false, sha256: (await import('node:crypto')).createHash('sha256').update(data).digest('hex')}]
  const index: ReleaseIndex = {format: 1, app: 'foo', tag: '1.0.0', release: APP, modulepath: [APP], releases: [{release: APP, digest: treeDigest(files), files}]}
  const indexBytes = Buffer.from(JSON.stringify(index))
  const header = (path: string, size: number) => {
    const h = new Header({path, type: 'File', mode: 0o644, size, mtime: new Date(0)})
    h.encode()
    return h.block!
  }

  const head = Buffer.concat([header(RELEASE_INDEX, indexBytes.length), indexBytes, Buffer.alloc(512 - (indexBytes.length % 512)), header(`${APP}/big.bin`, 2 * 1024 ** 3)])
  const hostile = join(dir, 'big.tar.gz')
  // 2 GiB of zeros after the header: 32 gzip members of 64 MiB each, about 2 MB on disk.
  await writeFile(hostile, Buffer.concat([gzipSync(head), zeroMembers(64, 32), gzipSync(Buffer.alloc(1024))]))
  const moduleDir = join(dir, 'modules')
  await mkdir(moduleDir)
  const result = installPeak(hostile, moduleDir)
  t.is(result.exitCode, 65, result.message)
  t.regex(result.message, /big\.bin: size 2147483648 differs from 10/)
  t.true(result.maxRssMb < 300, `peak ${result.maxRssMb} MB`)
  await leftClean(t, moduleDir)
})

test('a release holding 50 MB of zeros packs and installs (no decompression-ratio refusal)', async (t) => {
  const {src, dir} = await packed(t)
  await writeFile(join(src, APP, 'zeros.bin'), Buffer.alloc(50 * 1024 * 1024))
  const archive = join(dir, 'zeros.tar.gz')
  const result = await packRelease({moduleDir: src, ref: APP, output: archive})
  t.true(result.bytes < 1024 * 1024, `${result.bytes} bytes`)
  const moduleDir = join(dir, 'modules')
  await mkdir(moduleDir)
  t.deepEqual((await install(archive, moduleDir)).installed, [APP])
  t.like(await verifyRelease(moduleDir, APP), {ok: true})
})

test('an entry name too long for the file system is refused with 65, naming it', async (t) => {
  // 4,000 bytes of path: a valid archive path, beyond PATH_MAX once under the module dir.
  const long = Array.from({length: 20}, (_, i) => `${String(i).padStart(2, '0')}${'d'.repeat(198)}`).join('/')
  const data = Buffer.from('x\n')
  const files = [{path: long, size: 2, executable: false, sha256: (await import('node:crypto')).createHash('sha256').update(data).digest('hex')}]
  const index: ReleaseIndex = {format: 1, app: 'foo', tag: '1.0.0', release: APP, modulepath: [APP], releases: [{release: APP, digest: treeDigest(files), files}]}
  const {dir} = await packed(t)
  const tarball = tarGz([
    {path: RELEASE_INDEX, data: Buffer.from(JSON.stringify(index))},
    {path: `${APP}/${long}`, data},
  ])
  const hostile = join(dir, 'long.tar.gz')
  await writeFile(hostile, tarball)
  const moduleDir = join(dir, 'modules')
  await mkdir(moduleDir)
  const error = await t.throwsAsync(install(hostile, moduleDir))
  t.true(error instanceof LocalpuppetError, error?.stack)
  t.is((error as LocalpuppetError).exitCode, 65, error?.message)
  t.regex(error!.message, /too long/)
  await leftClean(t, moduleDir)
})

test('empty directories survive pack and install, and verify notices one removed', async (t) => {
  const {archive, dir} = await packed(t, {[`${APP}/foo/files/empty`]: null, [`${APP}/foo/files/a/b`]: null})
  const moduleDir = join(dir, 'modules')
  await mkdir(moduleDir)
  await install(archive, moduleDir)
  t.deepEqual(await readdir(join(moduleDir, APP, 'foo', 'files', 'empty')), [])
  t.deepEqual(await readdir(join(moduleDir, APP, 'foo', 'files', 'a', 'b')), [])
  t.like(await verifyRelease(moduleDir, APP), {ok: true})
  await chmod(join(moduleDir, APP, 'foo', 'files'), 0o755)
  execFileSync('rmdir', [join(moduleDir, APP, 'foo', 'files', 'empty')])
  t.like(await verifyRelease(moduleDir, APP), {ok: false, missing: ['foo/files/empty/']})
})

/** A tmpfs of `kb` KiB mounted for the test (root only), unmounted at its end. */
async function smallDisk(t: ExecutionContext, kb: number): Promise<string> {
  const dir = join(await tempDir(t, 'localpuppet-full-'), 'disk')
  await mkdir(dir)
  execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${kb}k,mode=0755`, 'tmpfs', dir])
  t.teardown(() => {
    spawnSync('umount', [dir])
  })
  return dir
}

const rootTest = isRoot ? test.serial : test.skip

rootTest('disk full during install: 74, and no tag, record, staging or lock left', async (t) => {
  const {src, dir} = await packed(t)
  const random = (await import('node:crypto')).randomBytes(2 * 1024 * 1024)
  await writeFile(join(src, APP, 'big.bin'), random)
  const archive = join(dir, 'big.tar.gz')
  await packRelease({moduleDir: src, ref: APP, output: archive})
  const moduleDir = await smallDisk(t, 1024)
  const error = await t.throwsAsync(install(archive, moduleDir))
  t.true(error instanceof LocalpuppetError, error?.stack)
  t.is((error as LocalpuppetError).exitCode, 74, error?.message)
  t.regex(error!.message, /no space left/)
  await leftClean(t, moduleDir)
  // Once there is room, the same install works.
  await writeFile(join(src, APP, 'big.bin'), 'small now\n')
  await packRelease({moduleDir: src, ref: APP, output: archive})
  t.deepEqual((await install(archive, moduleDir)).installed, [APP])
})

rootTest('disk full during install --git: 74, and no tag, record, staging or lock left', async (t) => {
  const dir = await tempDir(t, 'localpuppet-gitfull-')
  const repo = join(dir, 'repo')
  await writeTree(repo, {'manifest.yaml': 'modulepath: []\n'})
  await writeFile(join(repo, 'big.bin'), (await import('node:crypto')).randomBytes(2 * 1024 * 1024))
  const git = (...args: string[]) => execFileSync('git', ['-C', repo, '-c', 'user.name=t', '-c', 'user.email=t@example.org', ...args])
  git('init', '-q')
  git('add', '.')
  git('commit', '-qm', 'one')
  git('tag', '1.0.0')
  const moduleDir = await smallDisk(t, 1024)
  const error = await t.throwsAsync(installGitTag({moduleDir, repo, app: 'foo', tag: '1.0.0'}))
  t.true(error instanceof LocalpuppetError, error?.stack)
  t.is((error as LocalpuppetError).exitCode, 74, error?.message)
  await leftClean(t, moduleDir)
})

rootTest('install --git of a repository another user owns passes on git\'s reason (dubious ownership)', async (t) => {
  const dir = await tempDir(t, 'localpuppet-dubious-')
  const repo = join(dir, 'repo')
  await writeTree(repo, {'manifest.yaml': 'modulepath: []\n'})
  const git = (...args: string[]) => execFileSync('git', ['-C', repo, '-c', 'user.name=t', '-c', 'user.email=t@example.org', ...args])
  git('init', '-q')
  git('add', '.')
  git('commit', '-qm', 'one')
  git('tag', '1.0.0')
  execFileSync('chown', ['-R', 'nobody:nogroup', repo])
  const moduleDir = join(dir, 'modules')
  await mkdir(moduleDir)
  const error = await t.throwsAsync(installGitTag({moduleDir, repo, app: 'foo', tag: '1.0.0'}))
  t.true(error instanceof LocalpuppetError, error?.stack)
  t.is((error as LocalpuppetError).exitCode, 65, error?.message)
  t.regex(error!.message, /dubious ownership/)
  t.false(await exists(join(moduleDir, APP)))
  await chown(repo, 0, 0)
})
