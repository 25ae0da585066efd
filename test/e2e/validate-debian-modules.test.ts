import {cp, mkdir, writeFile, readdir} from 'node:fs/promises'
import {join} from 'node:path'

import {dumpYaml} from '../../src/lib/yaml.js'
import {FIXTURES, cli, isolatePuppet} from '../helpers/cli.js'
import {testNeeding} from '../helpers/packages.js'
import {tempDir} from '../helpers/temp.js'

/** Debian's puppet-module-* packages (bin/setup --tests installs these): real code nobody here wrote. */
const DEBIAN = '/usr/share/puppet/modules'
const modulesTest = await testNeeding([
  'puppet-module-puppetlabs-ntp',
  'puppet-module-puppetlabs-apache',
  'puppet-module-puppetlabs-apt',
  'puppet-module-nova',
  'puppet-module-camptocamp-augeas',
  'puppet-module-saz-rsyslog',
  'puppet-module-camptocamp-systemd',
])

/** Each input, what the static pass says, and what Puppet says when it compiles it. */
const CASES: Record<string, {classes: unknown; static: RegExp | null; compile: RegExp | null}> = {
  // All 61 of ntp's parameters get their value from ntp/data/common.yaml.
  ntp: {classes: {ntp: {servers: ['0.debian.pool.ntp.org']}}, static: null, compile: null},
  systemd: {classes: {systemd: null}, static: null, compile: null},
  'apt-stage': {classes: {apt: {stage: 'main'}}, static: null, compile: null},
  'nova-db': {
    classes: {'nova::db::mysql': {dbname: 'nova'}},
    static: /^.*:3: Class\[Nova::Db::Mysql\]: expects a value for parameter 'password' \(debian\/tags\/1\.0\.0\/nova\/manifests\/db\/mysql\.pp:\d+\)$/,
    compile: /Class\[Nova::Db::Mysql\]: expects a value for parameter 'password'$/,
  },
  'apache-vhost': {
    classes: {apache: {default_vhost: 'yes'}},
    static: /:4: Class\[Apache\]: parameter 'default_vhost' expects a Boolean value, got String /,
    compile: /Class\[Apache\]: parameter 'default_vhost' expects a Boolean value, got String$/,
  },
  augeas: {classes: ['augeas'], static: /class augeas cannot be loaded \(Puppet: Could not find class augeas\): it is in augeas_core\/manifests\/init\.pp/, compile: /Could not find class (::)?augeas /},
  rsyslog: {classes: ['rsyslog'], static: /module directory saz-rsyslog is not a valid module name/, compile: /Could not find class (::)?rsyslog /},
}

modulesTest('static checks and --compile agree with Puppet on Debian\'s own modules', async (t) => {
  const dir = await tempDir(t)
  const release = join(dir, 'modules', 'debian', 'tags', '1.0.0')
  await mkdir(release, {recursive: true})
  await writeFile(join(release, 'manifest.yaml'), 'modulepath: []\n')
  // Copied, links followed: Debian's module directories are links (through /etc/alternatives), and a
  // release holds only regular files and directories.
  for (const module of await readdir(DEBIAN)) await cp(join(DEBIAN, module), join(release, module), {recursive: true, dereference: true})
  const inputs = join(dir, 'inputs')
  await mkdir(inputs)
  for (const [name, {classes}] of Object.entries(CASES)) {
    await writeFile(join(inputs, `${name}.yaml`), dumpYaml({app: 'debian/tags/1.0.0', classes}))
  }

  const result = await cli(['validate', inputs, '--module-dir', join(dir, 'modules'), '--compile', '--facts', join(FIXTURES, 'rules', 'facts', 'debian12.json'), '--format', 'json', '--', ...isolatePuppet(dir)])
  t.not(result.exitCode, 70, result.stderr)
  const report = JSON.parse(result.stdout) as {inputs: Array<{file: string; problems: Array<{check: string; message: string}>}>}
  for (const entry of report.inputs) {
    const name = entry.file.split('/').pop()!.replace('.yaml', '')
    const expected = CASES[name]
    const found = entry.problems.filter((p) => p.check !== 'compile' && p.check !== 'syntax')
    const compile = entry.problems.filter((p) => p.check === 'compile')
    if (expected.static) t.true(found.length === 1 && expected.static.test(found[0].message), `${name}: ${JSON.stringify(found)}`)
    else t.deepEqual(found, [], name)
    if (expected.compile) t.true(compile.length === 1 && expected.compile.test(compile[0].message), `${name}: ${JSON.stringify(compile)}`)
    else t.deepEqual(compile, [], name)
  }
})
