import {writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import test from 'ava'

import {cli} from '../helpers/cli.js'
import {tempDir, writeTree} from '../helpers/temp.js'

test('config shows each effective setting and where it came from; commands use them', async (t) => {
  const dir = await tempDir(t)
  const modules = join(dir, 'modules')
  await writeTree(modules, {'foo/tags/1.0.0/foo/manifests/init.pp': 'class foo {}\n'})
  const config = join(dir, 'config.yaml')
  await writeFile(config, `# node settings\nmodule_dir: ${modules}\nsource: https://releases.example.com/repo\npuppet_args: [--vardir, ${dir}/var]\ninput: ${dir}/input.yaml\n`)
  await writeFile(join(dir, 'input.yaml'), 'app: foo/tags/1.0.0\nclasses: [foo]\n')
  const env = {LOCALPUPPET_CONFIG: config, LOCALPUPPET_STATE_DIR: join(dir, 'state'), LOCALPUPPET_SOURCE: undefined}

  const text = await cli(['config'], {env})
  t.is(text.exitCode, 0, text.stderr)
  t.regex(text.stdout, new RegExp(`^module_dir +${modules} +${config}:2$`, 'm'))
  t.regex(text.stdout, /^state_dir +\S+ +env LOCALPUPPET_STATE_DIR$/m)
  t.regex(text.stdout, /^puppet +puppet +built-in default$/m)

  const json = JSON.parse((await cli(['config', '--json'], {env})).stdout)
  t.is(json.file, config)
  t.deepEqual(json.settings.source, {value: 'https://releases.example.com/repo', origin: 'file', from: `${config}:3`})
  t.deepEqual(json.settings.puppet_args.value, ['--vardir', `${dir}/var`])

  // plan with no INPUT, no --module-dir and no `--`: all three from the file; a flag still wins.
  const plan = JSON.parse((await cli(['plan', '--json', '--puppet', 'true'], {env})).stdout)
  t.is(plan.release, 'foo/tags/1.0.0')
  t.true(plan.command.includes(`${dir}/var`))
  const flagWins = await cli(['plan', '--module-dir', join(dir, 'elsewhere')], {env})
  t.is(flagWins.exitCode, 66)
})

test('a bad configuration file stops every command with one line naming the key and line (65)', async (t) => {
  const dir = await tempDir(t)
  const config = join(dir, 'config.yaml')
  await writeFile(config, 'module_dir: /srv/modules\nmodule-dir: /srv/other\n')
  for (const args of [['config'], ['status'], ['releases']]) {
    const result = await cli(args, {env: {LOCALPUPPET_CONFIG: config, LOCALPUPPET_STATE_DIR: dir}})
    t.is(result.exitCode, 65, args.join(' '))
    t.is(result.stderr, `localpuppet: ${config}:2: unknown setting "module-dir" (did you mean module_dir?); known: module_dir, state_dir, puppet, puppet_args, source, trust, input, layers_dir, metrics_file, input_from, node_name, prometheus, repository_id, puppetdb, puppetdb_ca, puppetdb_cert, puppetdb_key`)
  }
})
