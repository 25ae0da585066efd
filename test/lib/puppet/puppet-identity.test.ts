import {join} from 'node:path'

import test from 'ava'

import {explainPuppet, identifyLibrary, identifyPuppet, locatePuppet} from '../../../src/lib/puppet/puppet-identity.js'
import {tempDir, writeTree} from '../../helpers/temp.js'

const script = (body: string) => ({mode: 0o755, content: `#!/bin/sh\n${body}\n`})

test('a package owning the executable decides the implementation, its puppet/version.rb the version', async (t) => {
  const dir = await tempDir(t)
  await writeTree(dir, {
    'opt/bin/puppet': script('exit 0'),
    'usr/bin/puppet': script('exit 0'),
    'lib/openvox/puppet/version.rb': "module Puppet\n  PUPPETVERSION = '8.19.1'\nend\n",
    'lib/puppet/puppet/version.rb': "module Puppet\n  PUPPETVERSION = '8.10.0'\nend\n",
    'dpkg/openvox-agent.list': `/.\n${dir}/opt/bin/puppet\n${dir}/lib/openvox/puppet/version.rb\n`,
    'dpkg/puppet-agent.list': `/.\n${dir}/usr/bin/puppet\n${dir}/lib/puppet/puppet/version.rb\n`,
  })
  t.deepEqual(identifyPuppet(join(dir, 'opt/bin/puppet'), join(dir, 'dpkg')), {implementation: 'openvox', version: '8.19.1', path: join(dir, 'opt/bin/puppet'), owner: 'dpkg:openvox-agent'})
  t.deepEqual(identifyPuppet(join(dir, 'usr/bin/puppet'), join(dir, 'dpkg')), {implementation: 'puppet', version: '8.10.0', path: join(dir, 'usr/bin/puppet'), owner: 'dpkg:puppet-agent'})
})

test('a link to a packaged puppet is judged by its real path (usrmerge /bin, /opt/puppetlabs/bin)', async (t) => {
  const dir = await tempDir(t)
  await writeTree(dir, {
    'real/puppet': script('exit 0'),
    'bin/puppet': {symlink: '../real/puppet'},
    'dpkg/puppet.list': `${dir}/real/puppet\n`,
  })
  t.like(identifyPuppet(join(dir, 'bin/puppet'), join(dir, 'dpkg')), {implementation: 'puppet', version: null, path: join(dir, 'bin/puppet'), owner: 'dpkg:puppet'})
})

test('a gem tells the implementation by its name, never by --version (which prints the same for both)', async (t) => {
  const dir = await tempDir(t)
  await writeTree(dir, {
    'gems/openvox-8.19.1/bin/puppet': script('echo 8.19.1'),
    'gems/openvox-8.19.1/lib/puppet/version.rb': "PUPPETVERSION = '8.19.1'\n",
    'local/bin/puppet': {mode: 0o755, content: "#!/usr/bin/ruby\nrequire 'rubygems'\nload Gem.activate_bin_path('openvox', 'puppet', version)\n"},
    'wrapper/puppet': script('exec /usr/bin/puppet "$@"'),
    dpkg: null,
  })
  t.like(identifyPuppet(join(dir, 'gems/openvox-8.19.1/bin/puppet'), join(dir, 'dpkg')), {implementation: 'openvox', version: '8.19.1', owner: 'gem:openvox'})
  t.like(identifyPuppet(join(dir, 'local/bin/puppet'), join(dir, 'dpkg')), {implementation: 'openvox', version: null, owner: 'gem:openvox'})
  t.like(identifyPuppet(join(dir, 'wrapper/puppet'), join(dir, 'dpkg')), {implementation: null, version: null, owner: null}, 'a wrapper nothing owns is not guessed at')
})

test('finding puppet: a set path as it is; plain puppet on PATH, then /opt/puppetlabs/bin/puppet', async (t) => {
  const dir = await tempDir(t)
  await writeTree(dir, {'path/puppet': script('exit 0'), 'opt/puppet': script('exit 0'), 'other/puppet': script('exit 0'), empty: null})
  const fallback = join(dir, 'opt/puppet')
  t.deepEqual(locatePuppet('puppet', {PATH: join(dir, 'path')}, fallback), {path: join(dir, 'path/puppet'), found: 'PATH'})
  t.deepEqual(locatePuppet('puppet', {PATH: join(dir, 'empty')}, fallback), {path: fallback, found: 'fallback'})
  t.deepEqual(locatePuppet('puppet', {PATH: join(dir, 'empty')}, join(dir, 'nowhere')), {path: null, found: 'missing'})
  t.deepEqual(locatePuppet(join(dir, 'other/puppet'), {PATH: join(dir, 'path')}, fallback), {path: join(dir, 'other/puppet'), found: 'setting'})
  t.deepEqual(locatePuppet(join(dir, 'missing/puppet'), {PATH: join(dir, 'path')}, fallback), {path: null, found: 'missing'}, 'a path that is set never falls back')

  t.is(explainPuppet('puppet', 'built-in', {PATH: join(dir, 'empty')}, fallback).why, `puppet, the default, is not on PATH; ${fallback} is where Puppet's and OpenVox's packages put it`)
  t.is(explainPuppet('puppet', 'built-in', {PATH: join(dir, 'path')}, fallback).why, 'puppet, the default, found on PATH')
  t.is(explainPuppet(join(dir, 'other/puppet'), 'LOCALPUPPET_PUPPET', {}, fallback).why, `${join(dir, 'other/puppet')}, set by LOCALPUPPET_PUPPET`)
})

test("a Puppet library (the puppet/version.rb a Ruby process loaded) is whoever's file list or gem directory holds it", async (t) => {
  const dir = await tempDir(t)
  await writeTree(dir, {'lib/puppet/version.rb': "PUPPETVERSION = '8.10.0'\n", 'dpkg/puppet-agent.list': `${dir}/lib/puppet/version.rb\n`})
  t.deepEqual(identifyLibrary(join(dir, 'lib/puppet/version.rb'), join(dir, 'dpkg')), {implementation: 'puppet', owner: 'dpkg:puppet-agent'})
  t.deepEqual(identifyLibrary('/var/lib/gems/3.3.0/gems/openvox-8.19.1/lib/puppet/version.rb', join(dir, 'dpkg')), {implementation: 'openvox', owner: 'gem:openvox'})
  t.is(identifyLibrary('/src/puppet/lib/puppet/version.rb', join(dir, 'dpkg')), null)
})
