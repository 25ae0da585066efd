import {execFileSync} from 'node:child_process'
import {closeSync, openSync} from 'node:fs'
import {readFile, utimes, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import test from 'ava'

import {packDebs} from '../../../src/lib/deb/build-deb.js'
import {type DebEntry, writeDeb} from '../../../src/lib/deb/deb-writer.js'
import {LocalpuppetError} from '../../../src/lib/errors.js'
import {tempDir, writeReleases, writeTree} from '../../helpers/temp.js'

async function fixture(t: Parameters<typeof tempDir>[0]): Promise<string> {
  const modules = join(await tempDir(t, 'localpuppet-deb-src-'), 'modules')
  await writeReleases(modules, {'web/tags/1.4.0': ['base/tags/2.0.1'], 'base/tags/2.0.1': null, 'web/trunk': ['base/tags/2.0.1']})
  await writeTree(modules, {'base/tags/2.0.1/bin/hook': {mode: 0o755, content: '#!/bin/sh\nexit 0\n'}, 'base/tags/2.0.1/base/files/motd': 'welcome\n', 'base/tags/2.0.1/base/templates': null})
  return modules
}

const dpkgDeb = (...args: string[]) => execFileSync('dpkg-deb', args, {encoding: 'utf8'})

test('one package per release: names, Depends, files under the node module dir with the install record', async (t) => {
  const modules = await fixture(t)
  const out = await tempDir(t)
  const result = await packDebs({moduleDir: modules, ref: 'web@^1.4', outputDir: out, nodeModuleDir: '/srv/puppet/modules/'})
  t.is(result.release, 'web/tags/1.4.0')
  t.is(result.nodeModuleDir, '/srv/puppet/modules')
  t.deepEqual(result.packages.map((p) => [p.package, p.version, p.depends]), [
    ['localpuppet-web-1.4.0', '1.4.0', ['localpuppet-base-2.0.1']],
    ['localpuppet-base-2.0.1', '2.0.1', []],
  ])
  const web = result.packages[0]
  t.is(web.file, join(out, 'localpuppet-web-1.4.0_1.4.0_all.deb'))
  t.is(dpkgDeb('--field', web.file, 'Package', 'Version', 'Architecture', 'Depends'), 'Package: localpuppet-web-1.4.0\nVersion: 1.4.0\nArchitecture: all\nDepends: localpuppet-base-2.0.1\n')

  const contents = dpkgDeb('--contents', result.packages[1].file).trim().split('\n').map((line) => {
    const [mode, owner, , , , path] = line.split(/\s+/)
    return `${mode} ${owner} ${path}`
  })
  t.deepEqual(contents, [
    'drwxr-xr-x root/root ./',
    'drwxr-xr-x root/root ./srv/',
    'drwxr-xr-x root/root ./srv/puppet/',
    'drwxr-xr-x root/root ./srv/puppet/modules/',
    'drwxr-xr-x root/root ./srv/puppet/modules/.localpuppet/',
    'drwxr-xr-x root/root ./srv/puppet/modules/.localpuppet/records/',
    'drwxr-xr-x root/root ./srv/puppet/modules/.localpuppet/records/base/',
    'drwxr-xr-x root/root ./srv/puppet/modules/.localpuppet/records/base/tags/',
    '-rw-r--r-- root/root ./srv/puppet/modules/.localpuppet/records/base/tags/2.0.1.json',
    'drwxr-xr-x root/root ./srv/puppet/modules/base/',
    'drwxr-xr-x root/root ./srv/puppet/modules/base/tags/',
    'dr-xr-xr-x root/root ./srv/puppet/modules/base/tags/2.0.1/',
    'dr-xr-xr-x root/root ./srv/puppet/modules/base/tags/2.0.1/base/',
    'dr-xr-xr-x root/root ./srv/puppet/modules/base/tags/2.0.1/base/files/',
    '-r--r--r-- root/root ./srv/puppet/modules/base/tags/2.0.1/base/files/motd',
    'dr-xr-xr-x root/root ./srv/puppet/modules/base/tags/2.0.1/base/manifests/',
    '-r--r--r-- root/root ./srv/puppet/modules/base/tags/2.0.1/base/manifests/init.pp',
    'dr-xr-xr-x root/root ./srv/puppet/modules/base/tags/2.0.1/base/templates/',
    'dr-xr-xr-x root/root ./srv/puppet/modules/base/tags/2.0.1/bin/',
    '-r-xr-xr-x root/root ./srv/puppet/modules/base/tags/2.0.1/bin/hook',
  ])

  const info = dpkgDeb('--info', web.file)
  t.regex(info, /^ Package: localpuppet-web-1\.4\.0$/m)
  t.regex(info, /\bpreinst\b.*#!\/bin\/sh/)
  const record = JSON.parse(execFileSync('sh', ['-c', `dpkg-deb --fsys-tarfile '${web.file}' | tar -xOf - ./srv/puppet/modules/.localpuppet/records/web/tags/1.4.0.json`], {encoding: 'utf8'}))
  t.is(record.release, 'web/tags/1.4.0')
  t.is(record.digest, web.digest)
  t.deepEqual(record.source, {type: 'deb', package: 'localpuppet-web-1.4.0', version: '1.4.0'})
  t.deepEqual(record.files.map((f: {path: string}) => f.path), ['manifest.yaml', 'web/manifests/init.pp'])
  const baseRecord = JSON.parse(execFileSync('sh', ['-c', `dpkg-deb --fsys-tarfile '${result.packages[1].file}' | tar -xOf - ./srv/puppet/modules/.localpuppet/records/base/tags/2.0.1.json`], {encoding: 'utf8'}))
  t.deepEqual(baseRecord.dirs, ['base/templates'], 'empty directories are part of the release')
})

test('long and non-ASCII file names survive (GNU long names, as dpkg-deb writes them)', async (t) => {
  const modules = await fixture(t)
  const long = `base/files/${'deep/'.repeat(30)}${'x'.repeat(120)}.txt`
  await writeTree(modules, {[`base/tags/2.0.1/${long}`]: 'far down\n', 'base/tags/2.0.1/base/files/café ☕.txt': 'unicode\n'})
  const result = await packDebs({moduleDir: modules, ref: 'base/tags/2.0.1', outputDir: await tempDir(t), nodeModuleDir: '/srv/m'})
  const listed = dpkgDeb('--contents', result.packages[0].file)
  t.true(listed.includes(`./srv/m/base/tags/2.0.1/${long}\n`))
  t.true(listed.includes('./srv/m/base/tags/2.0.1/base/files/café ☕.txt\n'))
  const extracted = await tempDir(t)
  execFileSync('dpkg-deb', ['-x', result.packages[0].file, extracted])
  t.is(await readFile(join(extracted, `srv/m/base/tags/2.0.1/${long}`), 'utf8'), 'far down\n')
})

test('two packs of the same tree give identical bytes, whatever the files\' dates', async (t) => {
  const modules = await fixture(t)
  const first = await packDebs({moduleDir: modules, ref: 'web/tags/1.4.0', outputDir: await tempDir(t)})
  await utimes(join(modules, 'base/tags/2.0.1/base/files/motd'), 1_000_000, 1_000_000)
  await utimes(join(modules, 'web/tags/1.4.0/manifest.yaml'), new Date(), new Date())
  const second = await packDebs({moduleDir: modules, ref: 'web/tags/1.4.0', outputDir: await tempDir(t)})
  for (const [a, b] of first.packages.map((p, i) => [p, second.packages[i]])) {
    t.is(a.sha256, b.sha256)
    t.true((await readFile(a.file)).equals(await readFile(b.file)))
  }

  t.regex(dpkgDeb('--contents', first.packages[0].file), /1970-01-01 00:00/)
  const dated = await packDebs({moduleDir: modules, ref: 'web/tags/1.4.0', outputDir: await tempDir(t), sourceDateEpoch: 1_700_000_000})
  t.regex(dpkgDeb('--contents', dated.packages[0].file), /2023-11-14 22:13/)
})

test('mutable references, ambiguous names and a relative node module dir are refused, nothing written', async (t) => {
  const modules = await fixture(t)
  const out = await tempDir(t)
  await writeReleases(modules, {'Web/tags/1.0.0': null})
  for (const [options, code, message] of [
    [{ref: 'web/trunk'}, 65, /^pack web\/trunk: web\/trunk is mutable; packages carry tags$/],
    [{ref: 'Web/tags/1.0.0'}, 65, /^Web\/tags\/1\.0\.0: cannot be named as a Debian package without ambiguity: app "Web" has upper-case letters$/],
    [{ref: 'web/tags/1.4.0', nodeModuleDir: 'modules'}, 64, /^--node-module-dir modules: must be an absolute path/],
    [{ref: 'web/tags/9.9.9'}, 66, /web\/tags\/9\.9\.9 not found/],
  ] as const) {
    const error = await t.throwsAsync(packDebs({moduleDir: modules, outputDir: out, ...options}), {instanceOf: LocalpuppetError})
    t.is(error?.exitCode, code)
    t.regex(error!.message, message)
  }

  t.is(execFileSync('ls', ['-A', out], {encoding: 'utf8'}), '')
})

test('a file that changed between hashing and writing stops the package, with nothing more written', async (t) => {
  const dir = await tempDir(t)
  const source = join(dir, 'big.bin')
  await writeFile(source, Buffer.alloc(3 * 1024 * 1024, 7))
  const out = join(dir, 'x.deb')
  const fd = openSync(out, 'w')
  const entries: DebEntry[] = [{type: 'file', path: './big.bin', mode: 0o444, source, size: 3 * 1024 * 1024, sha256: '0'.repeat(64)}]
  await t.throwsAsync(writeDeb(fd, [], entries, 0), {instanceOf: LocalpuppetError, message: /big\.bin: changed while packing; pack again/})
  closeSync(fd)
  await new Promise((resolve) => setTimeout(resolve, 200))
  t.pass('no write after the file was closed')
})
