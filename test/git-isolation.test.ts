import {execFileSync} from 'node:child_process'
import {mkdir, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import test from 'ava'

import {cli} from './helpers/cli.js'
import {tempDir, writeTree} from './helpers/temp.js'

// Issue 27, item 9: what git does in a test must not depend on the machine's configuration
// (test/helpers/git-config.ts, loaded into every worker by package.json's ava.require).

/** A home whose global git configuration trusts every repository, as some machines' /root/.gitconfig does. */
async function trustingHome(t: Parameters<typeof tempDir>[0]): Promise<string> {
  const home = await tempDir(t)
  await writeFile(join(home, '.gitconfig'), '[safe]\n\tdirectory = *\n[user]\n\tname = somebody else\n')
  return home
}

test('git in a test reads the tests\' own global configuration and no system one, whatever HOME holds', async (t) => {
  const home = await trustingHome(t)
  const env = {...process.env, HOME: home, XDG_CONFIG_HOME: join(home, '.config')}
  t.is(process.env.GIT_CONFIG_NOSYSTEM, '1')
  const all = execFileSync('git', ['config', '--list', '--show-origin'], {env, cwd: home, encoding: 'utf8'})
  t.notRegex(all, /safe\.directory|somebody else/)
  t.is(execFileSync('git', ['config', '--global', '--list'], {env, encoding: 'utf8'}), 'user.name=localpuppet tests\nuser.email=tests@localpuppet.invalid\n')
})

const rootTest = process.getuid?.() === 0 ? test : test.skip
rootTest('install --git run by a test refuses a repository another user owns even where the machine trusts every repository', async (t) => {
  const home = await trustingHome(t)
  const dir = await tempDir(t)
  const repo = join(dir, 'repo')
  await writeTree(repo, {'foo/manifests/init.pp': 'class foo {}\n'})
  const git = (...args: string[]) => execFileSync('git', ['-C', repo, ...args])
  git('init', '-q')
  git('add', '.')
  git('commit', '-qm', 'one')
  git('tag', '1.0.0')
  execFileSync('chown', ['-R', 'nobody:nogroup', repo])
  t.teardown(() => execFileSync('chown', ['-R', '0:0', repo]))
  await mkdir(join(dir, 'modules'))
  const result = await cli(['install', '--git', repo, '--app', 'foo', '--tag', '1.0.0', '--module-dir', join(dir, 'modules')], {env: {HOME: home}})
  t.is(result.exitCode, 65, result.stderr)
  t.regex(result.stderr, /dubious ownership/)
})
