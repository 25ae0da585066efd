import {execFileSync} from 'node:child_process'
import {createHash} from 'node:crypto'
import {lstatSync} from 'node:fs'
import {chmod, mkdir, symlink, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import test from 'ava'

import {ReleaseError} from '../../../src/lib/errors.js'
import {TreeDigest, listEntries, treeDigest} from '../../../src/lib/tree/release-tree.js'
import type {UntrustedEntry} from '../../../src/lib/util/trusted-path.js'
import {tempDir} from '../../helpers/temp.js'

test('listEntries: files and empty directories in archive order; with a list for them, every entry others can write', async (t) => {
  const root = await tempDir(t)
  await mkdir(join(root, 'm', 'files', 'empty'), {recursive: true})
  await writeFile(join(root, 'm', 'init.pp'), 'class m {}\n')
  await writeFile(join(root, 'manifest.yaml'), 'modulepath: []\n')
  await chmod(join(root, 'm', 'init.pp'), 0o666)
  await chmod(join(root, 'm', 'files'), 0o775)
  const untrusted: UntrustedEntry[] = []
  const entries = listEntries(root, 'm/tags/1.0.0', untrusted)
  t.deepEqual(
    entries.map(({path, dir}) => ({path, dir})),
    [
      {path: 'm/files/empty', dir: true},
      {path: 'm/init.pp', dir: false},
      {path: 'manifest.yaml', dir: false},
    ],
  )
  // Judging trust, each file's lstat is kept: the key the check before a run compares (verified-cache.ts).
  const info = lstatSync(join(root, 'm', 'init.pp'))
  t.is(entries[1].stat?.key, `${info.dev}:${info.ino}:${info.size}:${info.mode}:${info.uid}:${info.mtimeMs}:${info.ctimeMs}`)
  t.is(entries[0].stat, undefined)
  t.true(listEntries(root, 'm/tags/1.0.0').every((entry) => entry.stat === undefined), 'no stat without a trust list')
  t.deepEqual(untrusted.map((entry) => [entry.path, entry.mode & 0o777]).sort(), [
    [join(root, 'm', 'files'), 0o775],
    [join(root, 'm', 'init.pp'), 0o666],
  ])

  // A link (mode 0777 of no meaning) is refused as a link, not as writable by others.
  await symlink('init.pp', join(root, 'm', 'link.pp'))
  const after: UntrustedEntry[] = []
  t.throws(() => listEntries(root, 'm/tags/1.0.0', after), {instanceOf: ReleaseError, message: /m\/link\.pp: a symbolic link/})
  t.false(after.some((entry) => entry.path.endsWith('link.pp')))
  // Judging trust, the walk goes on past the link: what others can write after it is seen too.
  await mkdir(join(root, 'z'))
  await writeFile(join(root, 'z', 'late.pp'), '', {mode: 0o666})
  await chmod(join(root, 'z', 'late.pp'), 0o666)
  t.throws(() => listEntries(root, 'm/tags/1.0.0', after), {instanceOf: ReleaseError, message: /m\/link\.pp: a symbolic link/})
  t.true(after.some((entry) => entry.path === join(root, 'z', 'late.pp')))
})

test('listEntries: a tree that cannot be read is a release error naming where (65), never an internal one', async (t) => {
  const root = await tempDir(t)
  // Deeper than PATH_MAX from the root: whoever can write a directory in a release can do this.
  // (perl, essential on Debian, changes directory by relative names: a shell's cd gives up past PATH_MAX.)
  execFileSync('perl', ['-e', 'chdir $ARGV[0] or die; for (1..18) { mkdir "d" x 250 or die; chdir "d" x 250 or die } open(F, ">f") or die', root])
  // GNU rm removes it by relative names; the temp dir's own clean-up could not.
  t.teardown(() => execFileSync('rm', ['-rf', join(root, 'd'.repeat(250))]))
  for (const untrusted of [undefined, []]) {
    const error = t.throws(() => listEntries(root, 'm/tags/1.0.0', untrusted), {instanceOf: ReleaseError})
    t.is(error.exitCode, 65)
    t.regex(error.message, /^m\/tags\/1\.0\.0\/d{100,}.*: a path too long to read$/)
  }
})

test('the release digest is sha256 over the lines its doc gives (files in byte order of the path, then empty directories), whether the files come in order or not', (t) => {
  const files = [
    {path: 'b', size: 0, executable: false, sha256: 'b'.repeat(64)},
    {path: 'a/x', size: 3, executable: true, sha256: 'a'.repeat(64)},
  ]
  const lines = `${'a'.repeat(64)} 3 x a/x\n${'b'.repeat(64)} 0 - b\ndir c/\ndir d/\n`
  const expected = `sha256:${createHash('sha256').update(lines).digest('hex')}`
  t.is(treeDigest(files, ['d', 'c']), expected)
  const streamed = new TreeDigest()
  for (const file of [files[1], files[0]]) streamed.file(file.path, file.size, file.executable, file.sha256)
  t.is(streamed.end(['d', 'c']), expected)
  // Many files: the lines are hashed a batch at a time, to the same digest.
  const many = Array.from({length: 3000}, (_, i) => ({path: `m/${String(i).padStart(5, '0')}`, size: i, executable: i % 2 === 0, sha256: 'c'.repeat(64)}))
  const text = many.map((file) => `${file.sha256} ${file.size} ${file.executable ? 'x' : '-'} ${file.path}\n`).join('')
  t.is(treeDigest(many), `sha256:${createHash('sha256').update(text).digest('hex')}`)
})
