import {realpath} from 'node:fs/promises'
import {join} from 'node:path'

import test, {type ExecutionContext} from 'ava'

import {ImmutabilityError, LocalpuppetError, NotFoundError, PathEscapeError, ReleaseError} from '../../../src/lib/errors.js'
import {parseReleaseManifest} from '../../../src/lib/release/release-manifest.js'
import {parseReleaseRef} from '../../../src/lib/release/release-ref.js'
import {type Resolution, realModuleDir, resolveRelease} from '../../../src/lib/release/resolve.js'
import {tempDir, writeReleases, writeTree} from '../../helpers/temp.js'

/** A module directory holding `releases`, and its real path. */
async function moduleDir(t: ExecutionContext, releases: Record<string, string[] | null>): Promise<{dir: string; real: string}> {
  const dir = await tempDir(t)
  await writeReleases(dir, releases)
  return {dir, real: await realpath(dir)}
}

const releasesOf = (resolution: Resolution): string[] => resolution.modulepath.map((entry) => entry.release)

// --- what each form resolves to -----------------------------------------------------------

test('a tag resolves to its root, then the manifest entries, as real absolute paths', async (t) => {
  const {dir, real} = await moduleDir(t, {'foo/tags/1.4.0': ['dist/tags/2.0.1'], 'dist/tags/2.0.1': null})
  const resolution = await resolveRelease(dir, 'foo/tags/1.4.0')
  t.is(resolution.moduleDir, real)
  t.deepEqual(resolution.modulepath, [
    {ref: 'foo/tags/1.4.0', release: 'foo/tags/1.4.0', app: 'foo', kind: 'tag', mutable: false, path: join(real, 'foo/tags/1.4.0'), requiredBy: null},
    {
      ref: 'dist/tags/2.0.1',
      release: 'dist/tags/2.0.1',
      app: 'dist',
      kind: 'tag',
      mutable: false,
      path: join(real, 'dist/tags/2.0.1'),
      requiredBy: 'foo/tags/1.4.0/manifest.yaml:2: modulepath[0]',
    },
  ])
  t.deepEqual(resolution.mutableEntries, [])
  t.deepEqual(resolution.warnings, [])
})

test('trunk and branches resolve and are mutable', async (t) => {
  const {dir, real} = await moduleDir(t, {'foo/trunk': null, 'foo/branches/feature-x': null})
  const trunk = await resolveRelease(dir, 'foo/trunk')
  t.like(trunk.modulepath[0], {release: 'foo/trunk', kind: 'trunk', mutable: true, path: join(real, 'foo/trunk')})
  const branch = await resolveRelease(dir, 'foo/branches/feature-x')
  t.like(branch.modulepath[0], {release: 'foo/branches/feature-x', kind: 'branch', mutable: true, path: join(real, 'foo/branches/feature-x')})
})

test('app/foo/trunk resolves to foo/trunk and keeps the reference as written', async (t) => {
  const {dir} = await moduleDir(t, {'foo/trunk': null})
  const resolution = await resolveRelease(dir, 'app/foo/trunk')
  t.like(resolution.modulepath[0], {ref: 'app/foo/trunk', release: 'foo/trunk', app: 'foo'})
})

test('a parsed reference is accepted as well as a string', async (t) => {
  const {dir} = await moduleDir(t, {'foo/tags/1.0.0': null})
  const resolution = await resolveRelease(dir, parseReleaseRef('foo/tags/1.0.0'))
  t.deepEqual(releasesOf(resolution), ['foo/tags/1.0.0'])
})

test('foo@^1.2 picks the highest matching tag by semver, and that choice is mutable', async (t) => {
  const {dir, real} = await moduleDir(t, {
    'foo/tags/1.2.0': null,
    'foo/tags/1.9.0': null,
    'foo/tags/1.10.0': null,
    'foo/tags/1.11.0-rc.1': null,
    'foo/tags/2.0.0': null,
    'foo/tags/r1': null,
  })
  const resolution = await resolveRelease(dir, 'foo@^1.2')
  t.deepEqual(resolution.modulepath, [
    {ref: 'foo@^1.2', release: 'foo/tags/1.10.0', app: 'foo', kind: 'tag', mutable: true, path: join(real, 'foo/tags/1.10.0'), requiredBy: null},
  ])
})

test('a range matches v-prefixed tags', async (t) => {
  const {dir} = await moduleDir(t, {'foo/tags/v1.2.0': null, 'foo/tags/v1.3.0': null, 'foo/tags/1.2.9': null})
  t.deepEqual(releasesOf(await resolveRelease(dir, 'foo@~1.3')), ['foo/tags/v1.3.0'])
  t.deepEqual(releasesOf(await resolveRelease(dir, 'foo@^1')), ['foo/tags/v1.3.0'])
})

test('a range takes a prerelease only when it names one', async (t) => {
  const {dir} = await moduleDir(t, {'foo/tags/1.2.0': null, 'foo/tags/1.3.0-rc.1': null})
  t.deepEqual(releasesOf(await resolveRelease(dir, 'foo@^1.2')), ['foo/tags/1.2.0'])
  t.deepEqual(releasesOf(await resolveRelease(dir, 'foo@^1.3.0-rc.0')), ['foo/tags/1.3.0-rc.1'])
})

test('among equal versions the higher build metadata wins', async (t) => {
  const {dir} = await moduleDir(t, {'foo/tags/1.0.0+build.9': null, 'foo/tags/1.0.0+build.10': null})
  t.deepEqual(releasesOf(await resolveRelease(dir, 'foo@1.0.0')), ['foo/tags/1.0.0+build.10'])
})

test('foo@r1 names an exact tag that is not semver, and it is immutable', async (t) => {
  const {dir} = await moduleDir(t, {'foo/tags/r1': null, 'foo/tags/r2': null, 'foo/tags/1.0.0': null})
  const resolution = await resolveRelease(dir, 'foo@r1')
  t.like(resolution.modulepath[0], {ref: 'foo@r1', release: 'foo/tags/r1', kind: 'tag', mutable: false})
})

test('a tag directory whose name only looks like semver does not break range resolution', async (t) => {
  const {dir} = await moduleDir(t, {'foo/tags/1.0.0': null, 'foo/tags/1.0.0-01': null, 'foo/tags/1.1.0-rc..1': null})
  t.deepEqual(releasesOf(await resolveRelease(dir, 'foo@^1')), ['foo/tags/1.0.0'])
})

// --- modulepath order -----------------------------------------------------------------------

test('dependencies are walked depth first and a shared one (diamond) appears once, where first reached', async (t) => {
  const {dir, real} = await moduleDir(t, {
    'foo/tags/1.0.0': ['a/tags/1.0.0', 'b/tags/1.0.0'],
    'a/tags/1.0.0': ['c/tags/1.0.0', 'd/tags/1.0.0'],
    'b/tags/1.0.0': ['c/tags/1.0.0', 'e/tags/1.0.0'],
    'c/tags/1.0.0': null,
    'd/tags/1.0.0': null,
    'e/tags/1.0.0': null,
  })
  const resolution = await resolveRelease(dir, 'foo/tags/1.0.0')
  t.deepEqual(releasesOf(resolution), ['foo/tags/1.0.0', 'a/tags/1.0.0', 'c/tags/1.0.0', 'd/tags/1.0.0', 'b/tags/1.0.0', 'e/tags/1.0.0'])
  t.deepEqual(
    resolution.modulepath.map((entry) => entry.path),
    ['foo', 'a', 'c', 'd', 'b', 'e'].map((app) => join(real, app, 'tags/1.0.0')),
  )
  t.is(resolution.modulepath[2].requiredBy, 'a/tags/1.0.0/manifest.yaml:2: modulepath[0]')
})

test('two references to the same release (tag and exact @tag) appear once', async (t) => {
  const {dir} = await moduleDir(t, {'foo/trunk': ['dist/tags/1.0.0', 'dist@1.0.0', 'app/dist/tags/1.0.0'], 'dist/tags/1.0.0': null})
  t.deepEqual(releasesOf(await resolveRelease(dir, 'foo/trunk')), ['foo/trunk', 'dist/tags/1.0.0'])
})

test('two releases of one app are both kept, with a warning', async (t) => {
  const {dir} = await moduleDir(t, {'foo/trunk': ['dist/tags/1.0.0', 'lib/trunk'], 'lib/trunk': ['dist/tags/2.0.0'], 'dist/tags/1.0.0': null, 'dist/tags/2.0.0': null})
  const resolution = await resolveRelease(dir, 'foo/trunk')
  t.deepEqual(releasesOf(resolution), ['foo/trunk', 'dist/tags/1.0.0', 'lib/trunk', 'dist/tags/2.0.0'])
  t.deepEqual(resolution.warnings, ['dist/tags/1.0.0 and dist/tags/2.0.0 are both on the modulepath; Puppet loads each module from the first that has it'])
})

test('a release with an empty manifest.yaml or an empty modulepath adds nothing', async (t) => {
  const dir = await tempDir(t)
  await writeTree(dir, {'foo/trunk/manifest.yaml': '', 'bar/trunk/manifest.yaml': 'modulepath:\n', 'baz/trunk/manifest.yaml': 'modulepath: []\n'})
  for (const ref of ['foo/trunk', 'bar/trunk', 'baz/trunk']) t.deepEqual(releasesOf(await resolveRelease(dir, ref)), [ref])
})

test('a cycle is refused (65), naming the entry that closes it and the chain', async (t) => {
  const {dir} = await moduleDir(t, {'foo/trunk': ['bar/trunk'], 'bar/trunk': ['dist/tags/1.0.0', 'foo/trunk'], 'dist/tags/1.0.0': null})
  const error = await t.throwsAsync(resolveRelease(dir, 'foo/trunk'), {instanceOf: ReleaseError})
  t.is(error.exitCode, 65)
  t.is(error.message, 'bar/trunk/manifest.yaml:3: modulepath[1]: "foo/trunk" makes a modulepath cycle: foo/trunk -> bar/trunk -> foo/trunk')
})

test('a release naming itself is a cycle', async (t) => {
  const {dir} = await moduleDir(t, {'foo/trunk': ['app/foo/trunk']})
  const error = await t.throwsAsync(resolveRelease(dir, 'foo/trunk'), {instanceOf: ReleaseError})
  t.is(error.message, 'foo/trunk/manifest.yaml:2: modulepath[0]: "app/foo/trunk" makes a modulepath cycle: foo/trunk -> foo/trunk')
})

// --- immutability ----------------------------------------------------------------------------

test('a tagged release naming a trunk is refused (65), naming the manifest entry', async (t) => {
  const {dir} = await moduleDir(t, {'foo/tags/1.0.0': ['dist/tags/2.0.0', 'lib/trunk'], 'dist/tags/2.0.0': null, 'lib/trunk': null})
  const error = await t.throwsAsync(resolveRelease(dir, 'foo/tags/1.0.0'), {instanceOf: ImmutabilityError})
  t.is(error.exitCode, 65)
  t.is(
    error.message,
    'foo/tags/1.0.0/manifest.yaml:3: modulepath[1]: "lib/trunk" is mutable (trunk); a tagged release may depend only on exact tags such as lib/tags/1.0.0',
  )
  t.deepEqual(error.suggestions, ['pin the dependency to an exact tag, or pass --allow-mutable to run it anyway (recorded in the run record)'])
})

test('a mutable entry deeper down a tagged release is refused too, naming its own manifest', async (t) => {
  const {dir} = await moduleDir(t, {'foo/tags/1.0.0': ['dist/tags/2.0.0'], 'dist/tags/2.0.0': ['lib/branches/wip'], 'lib/branches/wip': null})
  const error = await t.throwsAsync(resolveRelease(dir, 'foo/tags/1.0.0'), {instanceOf: ImmutabilityError})
  t.true(error.message.startsWith('dist/tags/2.0.0/manifest.yaml:2: modulepath[0]: "lib/branches/wip" is mutable (branch);'), error.message)
})

test('a range inside a tagged release is mutable and refused, suggesting the tag it chose', async (t) => {
  const {dir} = await moduleDir(t, {'foo/tags/1.0.0': ['dist@^2'], 'dist/tags/2.0.0': null, 'dist/tags/2.1.0': null})
  const error = await t.throwsAsync(resolveRelease(dir, 'foo/tags/1.0.0'), {instanceOf: ImmutabilityError})
  t.is(error.exitCode, 65)
  t.is(
    error.message,
    'foo/tags/1.0.0/manifest.yaml:2: modulepath[0]: "dist@^2" is mutable (a semver range); a tagged release may depend only on exact tags such as dist/tags/2.1.0',
  )
})

test('allowMutable lets mutable entries through and records each of them', async (t) => {
  const {dir} = await moduleDir(t, {
    'foo/tags/1.0.0': ['dist@^2', 'lib/trunk', 'exact/tags/1.0.0'],
    'dist/tags/2.1.0': null,
    'lib/trunk': ['sub/branches/x'],
    'sub/branches/x': null,
    'exact/tags/1.0.0': null,
  })
  const resolution = await resolveRelease(dir, 'foo/tags/1.0.0', {allowMutable: true})
  t.deepEqual(releasesOf(resolution), ['foo/tags/1.0.0', 'dist/tags/2.1.0', 'lib/trunk', 'sub/branches/x', 'exact/tags/1.0.0'])
  t.deepEqual(
    resolution.mutableEntries.map((entry) => [entry.ref, entry.release, entry.requiredBy]),
    [
      ['dist@^2', 'dist/tags/2.1.0', 'foo/tags/1.0.0/manifest.yaml:2: modulepath[0]'],
      ['lib/trunk', 'lib/trunk', 'foo/tags/1.0.0/manifest.yaml:3: modulepath[1]'],
      ['sub/branches/x', 'sub/branches/x', 'lib/trunk/manifest.yaml:2: modulepath[0]'],
    ],
  )
})

test('exact tags, including a non-semver foo@r1, are fine inside a tagged release', async (t) => {
  const {dir} = await moduleDir(t, {'foo/tags/1.0.0': ['dist@r1', 'lib/tags/v2.0.0'], 'dist/tags/r1': null, 'lib/tags/v2.0.0': null})
  const resolution = await resolveRelease(dir, 'foo/tags/1.0.0')
  t.deepEqual(releasesOf(resolution), ['foo/tags/1.0.0', 'dist/tags/r1', 'lib/tags/v2.0.0'])
  t.deepEqual(resolution.mutableEntries, [])
})

test('a trunk app may name mutable entries without --allow-mutable, and nothing is recorded', async (t) => {
  const {dir} = await moduleDir(t, {'foo/trunk': ['lib/trunk', 'dist@^1'], 'lib/trunk': null, 'dist/tags/1.0.0': null})
  const resolution = await resolveRelease(dir, 'foo/trunk')
  t.deepEqual(releasesOf(resolution), ['foo/trunk', 'lib/trunk', 'dist/tags/1.0.0'])
  t.deepEqual(resolution.mutableEntries, [])
})

// --- paths that leave the module directory ---------------------------------------------------

test('a release symlinked outside the module directory is refused (PathEscapeError, 65)', async (t) => {
  const dir = await tempDir(t)
  const outside = await tempDir(t)
  await writeReleases(outside, {'foo/tags/1.0.0': null})
  await writeTree(dir, {'foo/tags/1.0.0': {symlink: join(outside, 'foo/tags/1.0.0')}})
  const [real, realOutside] = [await realpath(dir), await realpath(outside)]
  const error = await t.throwsAsync(resolveRelease(dir, 'foo/tags/1.0.0'), {instanceOf: PathEscapeError})
  t.is(error.exitCode, 65)
  t.is(error.code, 'path-escape')
  t.is(error.message, `release foo/tags/1.0.0: resolves to ${join(realOutside, 'foo/tags/1.0.0')}, outside the module directory ${real}`)
})

test('an escaping dependency is named with the manifest entry that led to it', async (t) => {
  const dir = await tempDir(t)
  const outside = await tempDir(t)
  await writeReleases(dir, {'foo/trunk': ['evil/trunk']})
  await writeTree(dir, {'evil/trunk': {symlink: outside}})
  const error = await t.throwsAsync(resolveRelease(dir, 'foo/trunk'), {instanceOf: PathEscapeError})
  t.true(error.message.startsWith('release evil/trunk (foo/trunk/manifest.yaml:2: modulepath[0]): resolves to '), error.message)
})

test('a manifest.yaml symlinked outside the module directory is refused', async (t) => {
  const dir = await tempDir(t)
  const outside = await tempDir(t)
  await writeTree(outside, {'manifest.yaml': 'modulepath: []\n'})
  await writeTree(dir, {'foo/trunk/manifest.yaml': {symlink: join(outside, 'manifest.yaml')}})
  const error = await t.throwsAsync(resolveRelease(dir, 'foo/trunk'), {instanceOf: PathEscapeError})
  t.true(error.message.startsWith('foo/trunk/manifest.yaml: resolves to '), error.message)
})

test('a tags directory symlinked outside is refused when a range reads it', async (t) => {
  const dir = await tempDir(t)
  const outside = await tempDir(t)
  await writeReleases(outside, {'tags/1.0.0': null})
  await writeTree(dir, {'foo/tags': {symlink: join(outside, 'tags')}})
  const error = await t.throwsAsync(resolveRelease(dir, 'foo@^1'), {instanceOf: PathEscapeError})
  t.is(error.exitCode, 65)
})

test('symlinks that stay inside the module directory are followed to their real path', async (t) => {
  const {dir, real} = await moduleDir(t, {'foo/tags/1.0.0': null})
  await writeTree(dir, {'foo/tags/stable': {symlink: '1.0.0'}, 'alias/trunk': {symlink: '../foo/tags/1.0.0'}})
  const resolution = await resolveRelease(dir, 'foo/tags/stable')
  t.like(resolution.modulepath[0], {release: 'foo/tags/stable', path: join(real, 'foo/tags/1.0.0')})
  t.is((await resolveRelease(dir, 'alias/trunk')).modulepath[0].path, join(real, 'foo/tags/1.0.0'))
})

test('a module directory reached through a symlink resolves to real paths', async (t) => {
  const {real} = await moduleDir(t, {'foo/trunk': null})
  const links = await tempDir(t)
  await writeTree(links, {modules: {symlink: real}})
  const resolution = await resolveRelease(join(links, 'modules'), 'foo/trunk')
  t.is(resolution.moduleDir, real)
  t.is(resolution.modulepath[0].path, join(real, 'foo/trunk'))
})

// --- not found ---------------------------------------------------------------------------------

test('a missing tag is 66 and suggests the tags that exist, newest first', async (t) => {
  const {dir, real} = await moduleDir(t, {'foo/tags/1.9.0': null, 'foo/tags/1.10.0': null})
  const error = await t.throwsAsync(resolveRelease(dir, 'foo/tags/9.9.9'), {instanceOf: NotFoundError})
  t.is(error.exitCode, 66)
  t.is(error.message, `release foo/tags/9.9.9: foo/tags/9.9.9 not found in ${real}`)
  t.deepEqual(error.suggestions, ['foo has tags: 1.10.0, 1.9.0'])
})

test('an unknown app is 66 and suggests the apps that exist', async (t) => {
  const {dir, real} = await moduleDir(t, {'foo/trunk': null, 'dist/trunk': null})
  const error = await t.throwsAsync(resolveRelease(dir, 'fo/trunk'), {instanceOf: NotFoundError})
  t.is(error.exitCode, 66)
  t.is(error.message, `release fo/trunk: fo/trunk not found in ${real}`)
  t.deepEqual(error.suggestions, [`apps in ${real}: dist, foo`])
})

test('a missing dependency is 66 and names the manifest entry', async (t) => {
  const {dir, real} = await moduleDir(t, {'foo/trunk': ['dist/branches/gone']})
  const error = await t.throwsAsync(resolveRelease(dir, 'foo/trunk'), {instanceOf: NotFoundError})
  t.is(error.message, `release dist/branches/gone (foo/trunk/manifest.yaml:2: modulepath[0]): dist/branches/gone not found in ${real}`)
})

test('a range nothing satisfies is 66 and lists the tags there are', async (t) => {
  const {dir} = await moduleDir(t, {'foo/tags/1.0.0': null, 'foo/tags/2.0.0': null, 'foo/tags/3.0.0-rc.1': null})
  const error = await t.throwsAsync(resolveRelease(dir, 'foo@^3'), {instanceOf: NotFoundError})
  t.is(error.exitCode, 66)
  t.is(error.message, 'release foo@^3: no tag of foo satisfies "^3"; tags: 3.0.0-rc.1, 2.0.0, 1.0.0')
})

test('an exact @tag that does not exist is 66', async (t) => {
  const {dir} = await moduleDir(t, {'foo/tags/r1': null})
  const error = await t.throwsAsync(resolveRelease(dir, 'foo@r2'), {instanceOf: NotFoundError})
  t.is(error.message, 'release foo@r2: no tag of foo satisfies "r2"; tags: r1')
})

test('a range on an app without tags is 66', async (t) => {
  const {dir, real} = await moduleDir(t, {'foo/trunk': ['dist@^1']})
  const error = await t.throwsAsync(resolveRelease(dir, 'foo/trunk'), {instanceOf: NotFoundError})
  t.is(error.exitCode, 66)
  t.is(error.message, `release dist@^1 (foo/trunk/manifest.yaml:2: modulepath[0]): dist has no tags in ${real}`)
})

test('a missing module directory is 66', async (t) => {
  const dir = await tempDir(t)
  const missing = join(dir, 'no-such-modules')
  const error = await t.throwsAsync(resolveRelease(missing, 'foo/trunk'), {instanceOf: NotFoundError})
  t.is(error.exitCode, 66)
  t.is(error.message, `module directory ${missing}: not found`)
})

test('a module directory that is a file is 66', async (t) => {
  const dir = await tempDir(t)
  await writeTree(dir, {modules: 'not a directory\n'})
  const error = await t.throwsAsync(realModuleDir(join(dir, 'modules')), {instanceOf: NotFoundError})
  t.is(error.exitCode, 66)
  t.is(error.message, `module directory ${join(dir, 'modules')}: not a directory`)
})

test('a release that is a file, not a directory, is refused (65)', async (t) => {
  const dir = await tempDir(t)
  await writeTree(dir, {'foo/trunk': 'oops\n'})
  const error = await t.throwsAsync(resolveRelease(dir, 'foo/trunk'), {instanceOf: ReleaseError})
  t.is(error.message, 'release foo/trunk: not a directory')
})

// --- manifest.yaml --------------------------------------------------------------------------------

test('manifest.yaml with an unknown key is 65, naming the file and key with a did-you-mean', async (t) => {
  const dir = await tempDir(t)
  await writeTree(dir, {'foo/trunk/manifest.yaml': 'modulepaths:\n  - dist/trunk\n'})
  const error = await t.throwsAsync(resolveRelease(dir, 'foo/trunk'), {instanceOf: ReleaseError})
  t.is(error.exitCode, 65)
  t.is(error.message, 'foo/trunk/manifest.yaml: unknown key "modulepaths" (did you mean modulepath?); allowed: modulepath, strict, strict_variables')
})

test('manifest.yaml with bad YAML is 65, naming file, line and column', async (t) => {
  const dir = await tempDir(t)
  await writeTree(dir, {'foo/tags/1.0.0/manifest.yaml': 'modulepath:\n  - dist/trunk\n bad: [\n'})
  const error = await t.throwsAsync(resolveRelease(dir, 'foo/tags/1.0.0'), {instanceOf: ReleaseError})
  t.is(error.exitCode, 65)
  t.regex(error.message, /^foo\/tags\/1\.0\.0\/manifest\.yaml:3:\d+: /)
})

test('manifest.yaml whose modulepath is not a list is 65 with the line', async (t) => {
  const dir = await tempDir(t)
  await writeTree(dir, {'foo/trunk/manifest.yaml': '# deps\nmodulepath: dist/trunk\n'})
  const error = await t.throwsAsync(resolveRelease(dir, 'foo/trunk'), {instanceOf: ReleaseError})
  t.is(error.message, 'foo/trunk/manifest.yaml:2: modulepath must be a list of release references')
})

test('manifest.yaml that is not a mapping is 65', async (t) => {
  const dir = await tempDir(t)
  await writeTree(dir, {'foo/trunk/manifest.yaml': '- dist/trunk\n'})
  const error = await t.throwsAsync(resolveRelease(dir, 'foo/trunk'), {instanceOf: ReleaseError})
  t.is(error.message, 'foo/trunk/manifest.yaml: expected a mapping with a modulepath list')
})

test('an invalid entry in manifest.yaml is 65, naming its line and index', async (t) => {
  const dir = await tempDir(t)
  await writeReleases(dir, {'dist/trunk': null})
  await writeTree(dir, {'foo/trunk/manifest.yaml': 'modulepath:\n  - dist/trunk\n  # next one is wrong\n  - "dist/tunk"\n  - 12\n'})
  const error = await t.throwsAsync(resolveRelease(dir, 'foo/trunk'), {instanceOf: ReleaseError})
  t.is(error.exitCode, 65)
  t.is(error.message, 'foo/trunk/manifest.yaml:4: modulepath[1]: "dist/tunk" is not a release reference')

  await writeTree(dir, {'bar/trunk/manifest.yaml': 'modulepath:\n  - dist/trunk\n  - 12\n'})
  const notString = await t.throwsAsync(resolveRelease(dir, 'bar/trunk'), {instanceOf: ReleaseError})
  t.is(notString.message, 'bar/trunk/manifest.yaml: modulepath[1]: expected a string such as foo/trunk, foo/tags/1.2.0 or foo@^1.2, got number 12')
})

test('parseReleaseManifest keeps each entry with where it was written', (t) => {
  t.deepEqual(parseReleaseManifest('# release deps\nmodulepath:\n  - dist/tags/2.0.1\n\n  - "lib@^1.2"\n', 'foo/tags/1.0.0/manifest.yaml'), [
    {text: 'dist/tags/2.0.1', where: 'foo/tags/1.0.0/manifest.yaml:3: modulepath[0]'},
    {text: 'lib@^1.2', where: 'foo/tags/1.0.0/manifest.yaml:5: modulepath[1]'},
  ])
  t.deepEqual(parseReleaseManifest('', 'm.yaml'), [])
  t.deepEqual(parseReleaseManifest('modulepath: ~\n', 'm.yaml'), [])
})

test('an invalid reference as the app is 65 and resolution touches nothing', async (t) => {
  const {dir} = await moduleDir(t, {'foo/trunk': null})
  const error = await t.throwsAsync(resolveRelease(dir, 'foo/tunk'), {instanceOf: LocalpuppetError})
  t.is(error.exitCode, 65)
  t.is(error.message, 'release reference: "foo/tunk" is not a release reference')
})

test('an <app>/tags that cannot be listed (a file, say) is a clear error, never an internal one', async (t) => {
  const dir = await tempDir(t)
  await writeTree(dir, {'foo/tags': 'not a directory\n'})
  const error = await t.throwsAsync(resolveRelease(dir, 'foo@^1'), {instanceOf: LocalpuppetError})
  t.not(error.exitCode, 70)
  t.regex(error.message, /foo@\^1/)
})
