import {readFileSync} from 'node:fs'
import {mkdir} from 'node:fs/promises'
import {join} from 'node:path'

import test from 'ava'
import {execa} from 'execa'

import {REPO} from '../helpers/cli.js'
import {tempDir} from '../helpers/temp.js'

test('npm pack installs in an empty directory with no registry and no cache; npx localpuppet --version names the build, and it plans the demo', async (t) => {
  const dir = await tempDir(t)
  // An empty cache and --offline: the package needs nothing but itself (its dependencies are inside the bundle).
  const env = {npm_config_cache: join(dir, 'cache'), npm_config_update_notifier: 'false'}
  const {stdout} = await execa('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', dir], {cwd: REPO, env})
  const [packed] = JSON.parse(stdout) as {filename: string; files: {path: string}[]}[]
  const paths = packed.files.map((file) => file.path)
  t.true(paths.includes('dist/cli.cjs') && paths.includes('bin/run.js') && paths.includes('dist/build.json'))
  t.false(paths.some((path) => path.startsWith('src/') || path.startsWith('test/')), 'no sources or tests')

  const app = join(dir, 'empty')
  await mkdir(app)
  await execa('npm', ['install', '--offline', '--no-audit', '--no-fund', join(dir, packed.filename)], {cwd: app, env})
  const build = JSON.parse(readFileSync(join(REPO, 'dist', 'build.json'), 'utf8')) as {version: string; commit: string}
  const version = await execa('npx', ['--offline', 'localpuppet', '--version'], {cwd: app, env})
  t.true(version.stdout.startsWith(`localpuppet ${build.version} (commit ${build.commit}`), version.stdout)

  const demo = join(REPO, 'fixtures', 'demo')
  const plan = await execa('npx', ['--offline', 'localpuppet', 'plan', join(demo, 'input.yaml'), '--module-dir', join(demo, 'modules'), '--state-dir', join(dir, 'state'), '--json'], {cwd: app, env})
  t.is(JSON.parse(plan.stdout).release, 'foo/tags/1.4.0')
})
