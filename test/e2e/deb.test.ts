import {existsSync} from 'node:fs'
import {appendFile, chmod, chown, mkdir, readFile, readdir, rm, symlink, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import test, {type ExecutionContext} from 'ava'
import {execa} from 'execa'

import {cli, isolatePuppet} from '../helpers/cli.js'
import {dpkg, knownPackages, localAptRepository, purgeAfter, uniqueApps} from '../helpers/dpkg.js'
import {type Tree, tempDir, writeTree} from '../helpers/temp.js'
import {testNeeding} from '../helpers/packages.js'
import {asHostile, hostileUid} from '../helpers/hostile-user.js'

const aptRepositoryTest = await testNeeding(['apt-utils'], test.serial)

/**
 * A two-release fixture with names of its own: app `web` (tags 1.4.0, 1.5.0) on top of
 * `base` (2.0.1), each with a class that notifies, and packages of them built by the CLI.
 */
async function packed(t: ExecutionContext, options: {tags?: string[]} = {}) {
  const dir = await tempDir(t, 'localpuppet-deb-e2e-')
  const [web, base] = uniqueApps('web', 'base')
  purgeAfter(t, [web, base])
  const source = join(dir, 'source')
  const tree: Tree = {[`${base}/tags/2.0.1/${base}/manifests/init.pp`]: `class ${base} {\n  notify { '${base} says hello': }\n}\n`, [`${base}/tags/2.0.1/${base}/files`]: null}
  for (const tag of options.tags ?? ['1.4.0']) {
    tree[`${web}/tags/${tag}/manifest.yaml`] = `modulepath:\n  - ${base}/tags/2.0.1\n`
    tree[`${web}/tags/${tag}/${web}/manifests/init.pp`] = `class ${web} {\n  notify { '${web} ${tag} runs': }\n}\n`
  }

  await writeTree(source, tree)
  const modules = join(dir, 'node', 'modules')
  const debs = join(dir, 'debs')
  await mkdir(debs)
  const packs = []
  for (const tag of options.tags ?? ['1.4.0']) {
    const result = await cli(['pack', `${web}/tags/${tag}`, '--format', 'deb', '--module-dir', source, '-o', debs, '--node-module-dir', modules, '--json'])
    t.is(result.exitCode, 0, result.stderr)
    packs.push(JSON.parse(result.stdout))
  }

  return {dir, web, base, source, modules, debs, packs}
}

test.serial('pack --format deb for a two-release fixture: dpkg -i, verify, releases, a real apply, then dpkg -r cleans up', async (t) => {
  const {dir, web, base, modules, packs} = await packed(t)
  const [app, dependency] = packs[0].packages
  t.deepEqual([app.package, dependency.package], [`localpuppet-${web}-1.4.0`, `localpuppet-${base}-2.0.1`])

  const installed = await dpkg(['-i', dependency.file, app.file])
  t.is(installed.exitCode, 0, installed.stderr)
  t.regex((await dpkg(['-l', app.package, dependency.package], 'dpkg-query')).stdout, new RegExp(`^ii  localpuppet-${web}-1\\.4\\.0 +1\\.4\\.0 +all `, 'm'))

  const verified = await cli(['verify', '--module-dir', modules])
  t.is(verified.exitCode, 0, verified.stderr)
  t.is(verified.stdout, `ok        ${base}/tags/2.0.1\nok        ${web}/tags/1.4.0`)
  const releases = JSON.parse((await cli(['releases', '--module-dir', modules, '--json'])).stdout)
  t.deepEqual(releases.map((r: any) => [r.app, r.tags.map((tag: any) => [tag.tag, tag.recorded, tag.verified])]), [
    [base, [['2.0.1', true, true]]],
    [web, [['1.4.0', true, true]]],
  ])

  const input = join(dir, 'input.yaml')
  await writeFile(input, `app: ${web}@^1.4\nclasses:\n  ${web}:\n  ${base}:\n`)
  const applied = await cli(['apply', input, '--module-dir', modules, '--state-dir', join(dir, 'state'), '--', ...isolatePuppet(dir)])
  t.is(applied.exitCode, 0, applied.stderr)
  t.regex(applied.stdout, new RegExp(`Notice: ${web} 1\\.4\\.0 runs`))
  t.regex(applied.stdout, new RegExp(`Notice: ${base} says hello`))

  // A file changed under dpkg's feet: verify and apply see it, as for an archive install.
  const file = join(modules, `${base}/tags/2.0.1/${base}/manifests/init.pp`)
  await chmod(file, 0o644)
  await appendFile(file, '# edited\n')
  t.is((await cli(['verify', `${base}/tags/2.0.1`, '--module-dir', modules])).exitCode, 65)
  const refused = await cli(['apply', input, '--module-dir', modules, '--state-dir', join(dir, 'state'), '--', ...isolatePuppet(dir)])
  t.is(refused.exitCode, 65)
  t.regex(refused.stderr, /modified since install/)

  const removed = await dpkg(['--purge', app.package, dependency.package])
  t.is(removed.exitCode, 0, removed.stderr)
  t.false(existsSync(join(modules, web)), 'the release is gone')
  t.false(existsSync(join(modules, '.localpuppet', 'records', web)), 'and its record')
  t.deepEqual(await knownPackages([web, base]), [])
})

test.serial('a tag installed by localpuppet install: the package takes over the same content, refuses other or modified content', async (t) => {
  const {dir, web, base, source, modules, packs} = await packed(t)
  const [app, dependency] = packs[0].packages
  const archive = join(dir, 'web.tar.gz')
  t.is((await cli(['pack', `${web}/tags/1.4.0`, '--module-dir', source, '-o', archive])).exitCode, 0)
  await mkdir(modules, {recursive: true})
  t.is((await cli(['install', archive, '--module-dir', modules])).exitCode, 0)

  // Same content, untouched: dpkg owns it now, the record says so, verify agrees.
  const taken = await dpkg(['-i', dependency.file])
  t.is(taken.exitCode, 0, taken.stderr)
  const record = JSON.parse(await readFile(join(modules, `.localpuppet/records/${base}/tags/2.0.1.json`), 'utf8'))
  t.deepEqual(record.source, {type: 'deb', package: dependency.package, version: '2.0.1'})
  t.is((await cli(['verify', '--module-dir', modules])).exitCode, 0)

  // Modified after install: refused, the tag left exactly as it was.
  const file = join(modules, `${web}/tags/1.4.0/${web}/manifests/init.pp`)
  await chmod(file, 0o644)
  await appendFile(file, '# local change\n')
  const modified = await dpkg(['-i', app.file])
  t.not(modified.exitCode, 0)
  t.regex(modified.stderr, new RegExp(`localpuppet-${web}-1\\.4\\.0: ${web}/tags/1\\.4\\.0: was modified after it was installed; localpuppet verify ${web}/tags/1\\.4\\.0 lists the changes`))
  t.regex(await readFile(file, 'utf8'), /# local change/)
  t.deepEqual(await knownPackages([web]), [])

  // Other content under the same tag (another build): refused, naming both digests.
  const other = join(dir, 'other')
  await writeTree(other, {[`${web}/tags/1.4.0/${web}/manifests/init.pp`]: `class ${web} { notify { 'other': } }\n`})
  const otherDebs = join(dir, 'other-debs')
  await mkdir(otherDebs)
  t.is((await cli(['pack', `${web}/tags/1.4.0`, '--format', 'deb', '--module-dir', other, '-o', otherDebs, '--node-module-dir', modules])).exitCode, 0)
  const otherDeb = join(otherDebs, `localpuppet-${web}-1.4.0_1.4.0_all.deb`)
  const conflicting = await dpkg(['-i', otherDeb])
  t.not(conflicting.exitCode, 0)
  t.regex(conflicting.stderr, new RegExp(`localpuppet-${web}-1\\.4\\.0: ${web}/tags/1\\.4\\.0: already installed with other content \\(sha256:\\w+; this package has sha256:\\w+\\); tags are immutable`))
  t.regex(await readFile(file, 'utf8'), /# local change/)

  // Installed by dpkg: another build of the same tag is refused as a reinstall too, and
  // localpuppet install of other content over it is 73.
  const dependencyOther = join(dir, 'dep-other')
  await writeTree(dependencyOther, {[`${base}/tags/2.0.1/${base}/manifests/init.pp`]: `class ${base} { notify { 'changed': } }\n`})
  t.is((await cli(['pack', `${base}/tags/2.0.1`, '--format', 'deb', '--module-dir', dependencyOther, '-o', otherDebs, '--node-module-dir', modules])).exitCode, 0)
  const reinstall = await dpkg(['-i', join(otherDebs, `localpuppet-${base}-2.0.1_2.0.1_all.deb`)])
  t.not(reinstall.exitCode, 0)
  t.regex(reinstall.stderr, /already installed with other content/)
  const otherArchive = join(dir, 'base-other.tar.gz')
  t.is((await cli(['pack', `${base}/tags/2.0.1`, '--module-dir', dependencyOther, '-o', otherArchive])).exitCode, 0)
  const overPackage = await cli(['install', otherArchive, '--module-dir', modules])
  t.is(overPackage.exitCode, 73)
  t.regex(overPackage.stderr, /already installed with other content/)
  // The same content through install is a no-op: one owner stays dpkg.
  const archiveSame = join(dir, 'base.tar.gz')
  t.is((await cli(['pack', `${base}/tags/2.0.1`, '--module-dir', source, '-o', archiveSame])).exitCode, 0)
  const same = await cli(['install', archiveSame, '--module-dir', modules])
  t.is(same.exitCode, 0, same.stderr)
  t.regex(same.stdout, /unchanged/)
  t.is(JSON.parse(await readFile(join(modules, `.localpuppet/records/${base}/tags/2.0.1.json`), 'utf8')).source.type, 'deb')

  t.is((await dpkg(['--purge', dependency.package])).exitCode, 0)
  const after = JSON.parse((await cli(['releases', '--module-dir', modules, '--json'])).stdout)
  t.deepEqual(after.map((r: any) => r.app), [web], 'the package took its release with it; the archive-installed one stays')
})

aptRepositoryTest('fetch --source apt and apply --fetch with source: apt in the node configuration, from a local apt repository', async (t) => {
  const {dir, web, base, modules, debs} = await packed(t, {tags: ['1.4.0', '1.5.0']})
  const repo = await localAptRepository(dir, ['1.4.0', '1.5.0'].map((tag) => join(debs, `localpuppet-${web}-${tag}_${tag}_all.deb`)).concat(join(debs, `localpuppet-${base}-2.0.1_2.0.1_all.deb`)))
  t.is((await repo.update()).exitCode, 0)
  await mkdir(modules, {recursive: true})

  const fetched = await cli(['fetch', `${web}@~1.4`, '--source', 'apt', '--module-dir', modules, '--json'], {env: repo.env})
  t.is(fetched.exitCode, 0, fetched.stderr)
  const result = JSON.parse(fetched.stdout)
  t.is(result.source, 'apt')
  t.deepEqual(result.releases.map((r: any) => [r.release, r.status, r.modulepath]), [[`${web}/tags/1.4.0`, 'installed', [`${web}/tags/1.4.0`, `${base}/tags/2.0.1`]]])
  t.deepEqual(await knownPackages([web, base]), [`localpuppet-${base}-2.0.1`, `localpuppet-${web}-1.4.0`])

  const missing = await cli(['fetch', `${web}@^2`, '--source', 'apt', '--module-dir', modules], {env: repo.env})
  t.is(missing.exitCode, 66)
  t.regex(missing.stderr, new RegExp(`no tag of ${web} satisfies "\\^2" in apt's lists; apt has 1\\.5\\.0, 1\\.4\\.0`))

  // apply --fetch with the source from /etc/localpuppet/config.yaml's stand-in: the range
  // resolves against apt's tags (1.5.0), not the node's (1.4.0).
  const config = join(dir, 'config.yaml')
  await writeFile(config, `source: apt\nmodule_dir: ${modules}\n`)
  const input = join(dir, 'input.yaml')
  await writeFile(input, `app: ${web}@^1.4\nclasses:\n  ${web}:\n  ${base}:\n`)
  const applied = await cli(['apply', input, '--fetch', '--state-dir', join(dir, 'state'), '--', ...isolatePuppet(dir)], {env: {...repo.env, LOCALPUPPET_CONFIG: config}})
  t.is(applied.exitCode, 0, applied.stderr)
  t.regex(applied.stdout, new RegExp(`Notice: ${web} 1\\.5\\.0 runs`))
  t.regex(applied.stderr, new RegExp(`fetched ${web}/tags/1\\.5\\.0 from apt`))
  const verified = await cli(['verify', '--module-dir', modules])
  t.is(verified.stdout, `ok        ${base}/tags/2.0.1\nok        ${web}/tags/1.4.0\nok        ${web}/tags/1.5.0`)

  const purged = await dpkg(['purge', '-y', '-q', `localpuppet-${web}-1.4.0`, `localpuppet-${web}-1.5.0`, `localpuppet-${base}-2.0.1`], 'apt-get', repo.env)
  t.is(purged.exitCode, 0, purged.stderr)
  t.deepEqual(await knownPackages([web, base]), [])
  t.false(existsSync(join(modules, web)))
  t.false(existsSync(join(modules, base)))
})

aptRepositoryTest('a hostile apt repository: a package swapped after its index was made is refused by its hash (65), an unsigned repository lists nothing (66); nothing installed either way', async (t) => {
  const {dir, web, base, source, modules, debs} = await packed(t)
  const repo = await localAptRepository(dir, [join(debs, `localpuppet-${web}-1.4.0_1.4.0_all.deb`), join(debs, `localpuppet-${base}-2.0.1_2.0.1_all.deb`)])
  t.is((await repo.update()).exitCode, 0)
  await mkdir(modules, {recursive: true})
  // The mirror's copy of web 1.4.0 replaced by another build of the same name and version.
  await writeFile(join(source, web, 'tags', '1.4.0', web, 'manifests', 'init.pp'), `class ${web} {\n  exec { 'owned': command => '/bin/true' }\n}\n`)
  const other = join(dir, 'other')
  await mkdir(other)
  t.is((await cli(['pack', `${web}/tags/1.4.0`, '--format', 'deb', '--module-dir', source, '-o', other, '--node-module-dir', modules])).exitCode, 0)
  await execa('cp', [join(other, `localpuppet-${web}-1.4.0_1.4.0_all.deb`), repo.repo])
  const swapped = await cli(['fetch', `${web}/tags/1.4.0`, '--source', 'apt', '--module-dir', modules], {env: repo.env})
  t.is(swapped.exitCode, 65, swapped.stderr)
  t.regex(swapped.stderr, /Hash Sum mismatch|hashes do not match|Size mismatch/i)
  t.deepEqual(await knownPackages([web, base]), [])
  t.false(existsSync(join(modules, web)))

  // The same packages from a repository whose Release file is not signed, and no trusted=yes.
  const unsigned = await localAptRepository(join(dir, 'unsigned'), [join(debs, `localpuppet-${web}-1.4.0_1.4.0_all.deb`), join(debs, `localpuppet-${base}-2.0.1_2.0.1_all.deb`)], {trusted: false})
  await unsigned.update()
  const refused = await cli(['fetch', `${web}@^1`, '--source', 'apt', '--module-dir', modules], {env: unsigned.env})
  t.is(refused.exitCode, 66, refused.stderr)
  t.regex(refused.stderr, /in apt's lists; apt knows no package/)
  t.deepEqual(await knownPackages([web, base]), [])
  t.false(existsSync(join(modules, web)))
})

test('pack --format deb: flags that belong to archives are usage errors, and the JSON lists every package', async (t) => {
  const dir = await tempDir(t)
  const demo = join(dir, 'modules')
  await writeTree(demo, {'foo/tags/1.4.0/manifest.yaml': 'modulepath:\n  - dist/tags/2.0.1\n', 'foo/tags/1.4.0/foo/manifests/init.pp': 'class foo {}\n', 'dist/tags/2.0.1/platform/manifests/init.pp': 'class platform {}\n'})
  for (const [args, message] of [
    [['--sign', join(dir, 'key.pem')], /--sign is for archives: Debian packages are signed by the apt repository that serves them/],
    [['-o', '-'], /--format deb writes one file per release: -o names a directory/],
    [['--allow-mutable'], /--allow-mutable is for archives/],
  ] as const) {
    const result = await cli(['pack', 'foo/tags/1.4.0', '--format', 'deb', '--module-dir', demo, ...args])
    t.is(result.exitCode, 64, result.stderr)
    t.regex(result.stderr, message)
  }

  const archive = await cli(['pack', 'foo/tags/1.4.0', '--module-dir', demo, '--node-module-dir', '/srv/m', '-o', join(dir, 'x.tar.gz')])
  t.is(archive.exitCode, 64)
  t.regex(archive.stderr, /--node-module-dir is for --format deb/)

  const packed = await cli(['pack', 'foo@^1', '--format', 'deb', '--module-dir', demo, '-o', dir, '--json'])
  t.is(packed.exitCode, 0, packed.stderr)
  const result = JSON.parse(packed.stdout)
  t.is(result.format, 'deb')
  t.is(result.nodeModuleDir, '/etc/puppet/modules')
  t.deepEqual(result.packages.map((p: any) => [p.package, p.version, p.depends, p.file]), [
    ['localpuppet-foo-1.4.0', '1.4.0', ['localpuppet-dist-2.0.1'], join(dir, 'localpuppet-foo-1.4.0_1.4.0_all.deb')],
    ['localpuppet-dist-2.0.1', '2.0.1', [], join(dir, 'localpuppet-dist-2.0.1_2.0.1_all.deb')],
  ])
  const again = await cli(['pack', 'foo@^1', '--format', 'deb', '--module-dir', demo, '-o', join(dir, 'x')])
  t.is(again.exitCode, 66, 'a missing output directory')
  t.regex(again.stderr, /output directory .*\/x: not found/)
})

// Issue 26: odd but valid tag names, through pack, dpkg and apt's range resolution; names that could only map by folding two tags into one are refused at pack.
aptRepositoryTest('odd but valid tags (1.0-, v2.0.0-rc.1, 1..2, 1.0.0+build.5) go through dpkg and apt one-to-one; 1.0_beta and V1.0 are refused at pack (65), nothing written', async (t) => {
  const odd = ['1.0-', 'v2.0.0-rc.1', '1..2', '1.0.0+build.5']
  const {dir, web, base, source, modules, packs} = await packed(t, {tags: odd})
  t.deepEqual(packs.map((p: any) => [p.packages[0].package, p.packages[0].version]), [
    [`localpuppet-${web}-1.0-`, '0'],
    [`localpuppet-${web}-v2.0.0-rc.1`, '2.0.0-rc.1'],
    [`localpuppet-${web}-1..2`, '1..2'],
    [`localpuppet-${web}-1.0.0+build.5`, '1.0.0+build.5'],
  ])
  const repo = await localAptRepository(dir, [...packs.map((p: any) => p.packages[0].file), packs[0].packages[1].file])
  t.is((await repo.update()).exitCode, 0)
  await mkdir(modules, {recursive: true})
  const fetch = async (ref: string) => {
    const result = await cli(['fetch', ref, '--source', 'apt', '--module-dir', modules, '--json'], {env: repo.env})
    t.is(result.exitCode, 0, `${ref}: ${result.stderr}`)
    return JSON.parse(result.stdout).releases[0].release
  }

  // Ranges pick among the tags that are versions; the others are reached by name only.
  t.is(await fetch(`${web}@^2.0.0-rc.0`), `${web}/tags/v2.0.0-rc.1`)
  t.is(await fetch(`${web}@^1`), `${web}/tags/1.0.0+build.5`)
  t.is(await fetch(`${web}/tags/1.0-`), `${web}/tags/1.0-`)
  t.is(await fetch(`${web}/tags/1..2`), `${web}/tags/1..2`)
  const missing = await cli(['fetch', `${web}@^3`, '--source', 'apt', '--module-dir', modules], {env: repo.env})
  t.is(missing.exitCode, 66)
  t.regex(missing.stderr, /apt has v2\.0\.0-rc\.1, 1\.0\.0\+build\.5, 1\.\.2, 1\.0-$/m)
  t.deepEqual((await knownPackages([web])).sort(), odd.map((tag) => `localpuppet-${web}-${tag}`).sort())
  const verified = await cli(['verify', '--module-dir', modules])
  t.is(verified.exitCode, 0, verified.stderr)
  for (const tag of odd) t.regex(verified.stdout, new RegExp(`^ok +${web}/tags/${tag.replaceAll('.', '\\.').replaceAll('+', '\\+')}$`, 'm'))

  for (const [tag, why] of [['1.0_beta', /tag "1\.0_beta" must start with a digit \(or v and a digit\) and hold only \[a-z0-9\.\+-\]/], ['V1.0', /tag "V1\.0" has upper-case letters/]] as const) {
    await writeTree(source, {[`${web}/tags/${tag}/${web}/manifests/init.pp`]: `class ${web} {}\n`})
    const out = join(dir, `refused-${tag}`)
    await mkdir(out)
    const refused = await cli(['pack', `${web}/tags/${tag}`, '--format', 'deb', '--module-dir', source, '-o', out, '--node-module-dir', modules])
    t.is(refused.exitCode, 65, refused.stderr)
    t.regex(refused.stderr, new RegExp(`^localpuppet: ${web}/tags/${tag}: cannot be named as a Debian package without ambiguity: ${why.source}`))
    t.deepEqual(await readdir(out), [], 'nothing written')
  }

  const purged = await dpkg(['purge', '-y', '-q', ...odd.map((tag) => `localpuppet-${web}-${tag}`), `localpuppet-${base}-2.0.1`], 'apt-get', repo.env)
  t.is(purged.exitCode, 0, purged.stderr)
  t.false(existsSync(join(modules, web)))
})

const hostile = hostileUid()
const asRootSerial = hostile === null ? test.skip : test.serial

/** Every file under `dir`, with its content: to show dpkg wrote nothing there. */
async function contents(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {}
  for (const entry of await readdir(dir, {recursive: true, withFileTypes: true})) {
    if (entry.isFile()) out[join(entry.parentPath, entry.name)] = await readFile(join(entry.parentPath, entry.name), 'utf8')
  }

  return out
}

// Issue 26: the preinst when the tag is already there as a link, or in a directory another user owns or can write, on install and on upgrade (a reinstall).
asRootSerial('the preinst refuses a tag that is a symbolic link, or a directory (or <app>/tags) another user owns, on install and on upgrade: nothing written where a link leads', async (t) => {
  const {dir, web, source, modules, packs} = await packed(t)
  await chmod(dir, 0o755)
  const [app, dependency] = packs[0].packages
  t.is((await dpkg(['-i', dependency.file])).exitCode, 0)
  const tags = join(modules, web, 'tags')
  const tag = join(tags, '1.4.0')
  const archive = join(dir, 'web.tar.gz')
  t.is((await cli(['pack', `${web}/tags/1.4.0`, '--module-dir', source, '-o', archive])).exitCode, 0)
  const refusedWith = async (message: RegExp) => {
    const result = await dpkg(['-i', app.file])
    t.not(result.exitCode, 0, 'refused')
    t.regex(result.stderr, new RegExp(`^localpuppet-${web}-1\\.4\\.0: ${web}/tags/1\\.4\\.0: ${message.source}`, 'm'))
  }

  // Install: the tag installed by localpuppet (record and all), then its directory given to another user.
  t.is((await cli(['install', archive, '--module-dir', modules])).exitCode, 0)
  await execa('chown', ['-R', String(hostile), tag])
  await refusedWith(new RegExp(`${tag} is owned by uid ${hostile}, not root`))
  t.deepEqual(await knownPackages([web]), [])

  // Install: the tag a link to a copy of itself elsewhere (the record still says the same digest).
  await execa('chown', ['-R', 'root', tag])
  const elsewhere = join(dir, 'elsewhere')
  await execa('mv', [tag, elsewhere])
  await symlink(elsewhere, tag)
  const before = await contents(elsewhere)
  await refusedWith(new RegExp(`${tag} is a symbolic link: dpkg would write where it leads`))
  t.deepEqual(await contents(elsewhere), before)
  await rm(tag)
  await execa('mv', [elsewhere, tag])

  // Now dpkg's own: upgrade (a reinstall of the same package) meets the same link.
  const taken = await dpkg(['-i', app.file])
  t.is(taken.exitCode, 0, taken.stderr)
  await execa('mv', [tag, elsewhere])
  await symlink(elsewhere, tag)
  await execa('chmod', ['-R', 'u+w', elsewhere])
  await rm(join(elsewhere, web, 'manifests', 'init.pp'))
  const emptied = await contents(elsewhere)
  await refusedWith(new RegExp(`${tag} is a symbolic link: dpkg would write where it leads`))
  t.deepEqual(await contents(elsewhere), emptied, 'nothing written through the link')
  await rm(tag)
  await execa('mv', [elsewhere, tag])
  await writeFile(join(tag, web, 'manifests', 'init.pp'), await readFile(join(source, web, 'tags', '1.4.0', web, 'manifests', 'init.pp')))

  // Upgrade: the tag's directory another user's, who adds a file to it.
  await execa('chown', ['-R', String(hostile), tag])
  asHostile(`chmod u+w ${tag} && echo 'class evil {}' > ${tag}/evil.pp`)
  await refusedWith(new RegExp(`${tag} is owned by uid ${hostile}, not root`))
  await rm(join(tag, 'evil.pp'))
  await execa('chown', ['-R', 'root', tag])

  // Upgrade: <app>/tags another user's, who swaps the tag for a link to a directory of theirs.
  await chown(tags, hostile!, hostile!)
  const theirs = join(dir, 'theirs')
  await mkdir(theirs, {mode: 0o755})
  await chown(theirs, hostile!, hostile!)
  asHostile(`mv ${tag} ${tags}/.old && ln -s ${theirs}/target ${tag} && mkdir ${theirs}/target`)
  await refusedWith(new RegExp(`${tags} is owned by uid ${hostile}, not root`))
  t.deepEqual(await readdir(join(theirs, 'target')), [], 'nothing written where their link leads')
})
