import {existsSync} from 'node:fs'
import {mkdir, readFile, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import test from 'ava'

import {aptFailure, aptTags, fetchWithApt, resolveAptRef} from '../../../src/lib/source/apt-source.js'
import {verifyInstalled} from '../../../src/lib/verify/verify-installed.js'
import {packDebs} from '../../../src/lib/deb/build-deb.js'
import {LocalpuppetError} from '../../../src/lib/errors.js'
import {listReleases} from '../../../src/lib/verify/releases.js'
import {dpkg, knownPackages, localAptRepository, purgeAfter, uniqueApps} from '../../helpers/dpkg.js'
import {tempDir, writeReleases} from '../../helpers/temp.js'
import {testNeeding} from '../../helpers/packages.js'

const aptRepositoryTest = await testNeeding(['apt-utils'], test.serial)

aptRepositoryTest('a local apt repository as a source: a range picks the newest tag, apt brings its dependencies, removal cleans up', async (t) => {
  const dir = await tempDir(t, 'localpuppet-apt-')
  const [web, base] = uniqueApps('web', 'base')
  purgeAfter(t, [web, base])
  const source = join(dir, 'source')
  await writeReleases(source, {[`${web}/tags/1.4.0`]: [`${base}/tags/2.0.1`], [`${web}/tags/1.5.0`]: [`${base}/tags/2.0.1`], [`${web}/tags/2.0.0`]: [`${base}/tags/2.0.1`], [`${base}/tags/2.0.1`]: null})
  const modules = join(dir, 'node', 'modules')
  const debs = join(dir, 'debs')
  await mkdir(debs)
  for (const tag of ['1.4.0', '1.5.0', '2.0.0']) await packDebs({moduleDir: source, ref: `${web}/tags/${tag}`, outputDir: debs, nodeModuleDir: modules})
  const repo = await localAptRepository(dir, ['1.4.0', '1.5.0', '2.0.0'].map((tag) => join(debs, `localpuppet-${web}-${tag}_${tag}_all.deb`)).concat(join(debs, `localpuppet-${base}-2.0.1_2.0.1_all.deb`)))
  const updated = await repo.update()
  t.is(updated.exitCode, 0, updated.stderr)

  const options = {env: repo.env}
  t.deepEqual(await aptTags(web, options), ['2.0.0', '1.5.0', '1.4.0'])
  t.deepEqual(await resolveAptRef(`${web}@^1.4`, options), {release: `${web}/tags/1.5.0`, package: `localpuppet-${web}-1.5.0`})

  await mkdir(modules, {recursive: true})
  const fetched = await fetchWithApt({moduleDir: modules, refs: [`${web}@^1.4`], ...options})
  t.is(fetched.source, 'apt')
  t.deepEqual(fetched.releases.map((r) => [r.release, r.ref, r.package, r.status, r.modulepath]), [
    [`${web}/tags/1.5.0`, `${web}@^1.4`, `localpuppet-${web}-1.5.0`, 'installed', [`${web}/tags/1.5.0`, `${base}/tags/2.0.1`]],
  ])
  t.true(fetched.releases[0].bytes > 1000, 'the sizes of both packages apt installed')
  t.deepEqual(((await verifyInstalled(modules, [])).results).map((r) => [r.release, r.ok]), [
    [`${base}/tags/2.0.1`, true],
    [`${web}/tags/1.5.0`, true],
  ])

  const again = await fetchWithApt({moduleDir: modules, refs: [`${web}/tags/1.5.0`], ...options})
  t.deepEqual(again.releases.map((r) => [r.release, r.status, r.bytes]), [[`${web}/tags/1.5.0`, 'already present', 0]])

  for (const [ref, message] of [
    [`${web}@^3`, new RegExp(`^${web}@\\^3: no tag of ${web} satisfies "\\^3" in apt's lists; apt has 2\\.0\\.0, 1\\.5\\.0, 1\\.4\\.0$`)],
    [`${web}/tags/1.4.1`, /no tag of \w+ named 1\.4\.1 in apt's lists/],
    ['lptnosuchapp@^1', /apt knows no package localpuppet-lptnosuchapp-\*/],
  ] as const) {
    const error = await t.throwsAsync(fetchWithApt({moduleDir: modules, refs: [ref], ...options}), {instanceOf: LocalpuppetError})
    t.is(error?.exitCode, 66)
    t.regex(error!.message, message)
  }

  const trunk = await t.throwsAsync(fetchWithApt({moduleDir: modules, refs: [`${web}/trunk`], ...options}), {instanceOf: LocalpuppetError})
  t.is(trunk?.exitCode, 64)
  t.regex(trunk!.message, /apt has tags only; trunk and branches are never packaged/)

  const removed = await dpkg(['remove', '-y', '-q', `localpuppet-${web}-1.5.0`, `localpuppet-${base}-2.0.1`], 'apt-get', repo.env)
  t.is(removed.exitCode, 0, removed.stderr)
  t.deepEqual(await knownPackages([web, base]), [])
  t.false(existsSync(join(modules, web)))
  t.deepEqual(existsSync(modules) ? await listReleases(modules) : [], [])
})

aptRepositoryTest('a package built for another module directory is reported, not mistaken for installed', async (t) => {
  const dir = await tempDir(t, 'localpuppet-apt-')
  const [app] = uniqueApps('solo')
  purgeAfter(t, [app])
  const source = join(dir, 'source')
  await writeReleases(source, {[`${app}/tags/1.0.0`]: null})
  const debs = join(dir, 'debs')
  await mkdir(debs)
  await packDebs({moduleDir: source, ref: `${app}/tags/1.0.0`, outputDir: debs, nodeModuleDir: join(dir, 'elsewhere')})
  const repo = await localAptRepository(dir, [join(debs, `localpuppet-${app}-1.0.0_1.0.0_all.deb`)])
  t.is((await repo.update()).exitCode, 0)
  const modules = join(dir, 'modules')
  await mkdir(modules)
  const error = await t.throwsAsync(fetchWithApt({moduleDir: modules, refs: [`${app}@1.0.0`], env: repo.env}), {instanceOf: LocalpuppetError})
  t.is(error?.exitCode, 66)
  t.regex(error!.message, new RegExp(`localpuppet-${app}-1\\.0\\.0: installed, but ${app}/tags/1\\.0\\.0 is not in .*packed for another --node-module-dir`))
})

test('apt failures keep apt\'s message and get the documented exit codes', (t) => {
  const cases: Array<[string, number, RegExp]> = [
    ['E: Unable to locate package localpuppet-foo-1.0.0', 66, /^apt-get install x: Unable to locate package localpuppet-foo-1\.0\.0$/],
    ['E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 42 (apt-get)', 73, /Could not get lock/],
    ['W: GPG error: file:/repo ./ Release: The following signatures couldn\'t be verified because the public key is not available: NO_PUBKEY 1234\nE: The repository is not signed.', 65, /The repository is not signed/],
    ['E: Could not open lock file /var/lib/dpkg/lock-frontend - open (13: Permission denied)\nE: Unable to acquire the dpkg frontend lock (/var/lib/dpkg/lock-frontend), are you root?', 66, /Permission denied/],
    ['E: Failed to fetch http://127.0.0.1:9/pool/x.deb  Could not connect to 127.0.0.1:9 (127.0.0.1). - connect (111: Connection refused)', 69, /Failed to fetch/],
    ['localpuppet-foo-1.0.0: foo/tags/1.0.0: already installed with other content (a; this package has b); tags are immutable\ndpkg: error processing archive x.deb (--unpack):\n new localpuppet-foo-1.0.0 package pre-installation script subprocess returned error exit status 1\nE: Sub-process /usr/bin/dpkg returned an error code (1)', 73, /^apt-get install x: localpuppet-foo-1\.0\.0: foo\/tags\/1\.0\.0: already installed with other content/],
  ]
  for (const [stderr, code, message] of cases) {
    const error = aptFailure('apt-get install x', {exitCode: 100, stdout: '', stderr, spawnError: null})
    t.is(error.exitCode, code, stderr)
    t.regex(error.message, message)
  }
})

aptRepositoryTest('a package changed in the repository after apt read its lists is refused by apt\'s hash check, 65, nothing installed', async (t) => {
  const dir = await tempDir(t, 'localpuppet-apt-')
  const [app] = uniqueApps('tampered')
  purgeAfter(t, [app])
  const modules = join(dir, 'modules')
  const build = async (name: string, text: string) => {
    const source = join(dir, name)
    await writeReleases(source, {[`${app}/tags/1.0.0`]: null})
    await writeFile(join(source, `${app}/tags/1.0.0/extra.txt`), text)
    const out = join(dir, `${name}-debs`)
    await mkdir(out)
    return (await packDebs({moduleDir: source, ref: `${app}/tags/1.0.0`, outputDir: out, nodeModuleDir: modules})).packages[0].file
  }

  const good = await build('good', 'as published\n')
  const evil = await build('evil', 'substituted!\n')
  const repo = await localAptRepository(dir, [good])
  t.is((await repo.update()).exitCode, 0)
  await writeFile(join(dir, 'repo', `localpuppet-${app}-1.0.0_1.0.0_all.deb`), await readFile(evil))
  await mkdir(modules)
  const error = await t.throwsAsync(fetchWithApt({moduleDir: modules, refs: [`${app}@1.0.0`], env: repo.env}), {instanceOf: LocalpuppetError})
  t.is(error?.exitCode, 65, error?.message)
  t.regex(error!.message, /^apt-get install localpuppet-\w+-1\.0\.0: .*(Hash Sum mismatch|hashes do not match|File has unexpected size)/i)
  t.deepEqual(await knownPackages([app]), [])
  t.false(existsSync(join(modules, app)))
})

aptRepositoryTest('an unsigned repository (no key, no [trusted=yes]): apt lists none of its packages, so fetch installs nothing (66)', async (t) => {
  const dir = await tempDir(t, 'localpuppet-apt-')
  const [app] = uniqueApps('unsigned')
  purgeAfter(t, [app])
  const source = join(dir, 'source')
  await writeReleases(source, {[`${app}/tags/1.0.0`]: null})
  const debs = join(dir, 'debs')
  await mkdir(debs)
  await packDebs({moduleDir: source, ref: `${app}/tags/1.0.0`, outputDir: debs, nodeModuleDir: join(dir, 'modules')})
  const repo = await localAptRepository(dir, [join(debs, `localpuppet-${app}-1.0.0_1.0.0_all.deb`)])
  const list = join(dir, 'apt', 'sources.list')
  await writeFile(list, (await readFile(list, 'utf8')).replace('[trusted=yes] ', ''))
  const updated = await repo.update()
  t.regex(updated.stderr + updated.stdout, /not signed|NO_PUBKEY|unauthenticated|Release/i)
  t.deepEqual(await aptTags(app, {env: repo.env}), [], 'apt does not list packages of an unsigned repository')
  const error = await t.throwsAsync(fetchWithApt({moduleDir: dir, refs: [`${app}@^1`], env: repo.env}), {instanceOf: LocalpuppetError})
  t.is(error?.exitCode, 66)
  t.deepEqual(await knownPackages([app]), [])
})
