import {writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import test from 'ava'

import {clearConfigCache, parseConfig, resolveSetting, resolveSettings} from '../../../src/lib/config/settings.js'
import {LocalpuppetError} from '../../../src/lib/errors.js'
import {tempDir} from '../../helpers/temp.js'

test.afterEach(() => clearConfigCache())

async function configFile(t: Parameters<typeof tempDir>[0], text: string): Promise<NodeJS.ProcessEnv> {
  const dir = await tempDir(t)
  const path = join(dir, 'config.yaml')
  await writeFile(path, text)
  return {LOCALPUPPET_CONFIG: path, HOME: '/home/x'}
}

test('precedence: flag, then environment, then the file, then the built-in default', async (t) => {
  const env = await configFile(t, 'module_dir: /from/file\npuppet: /opt/puppet\n')
  t.like(await resolveSetting('module_dir', '/from/flag', {...env, LOCALPUPPET_MODULE_DIR: '/from/env'}), {value: '/from/flag', origin: 'flag'})
  t.like(await resolveSetting('module_dir', undefined, {...env, LOCALPUPPET_MODULE_DIR: '/from/env'}), {value: '/from/env', origin: 'env', from: 'LOCALPUPPET_MODULE_DIR'})
  t.like(await resolveSetting('module_dir', undefined, env), {value: '/from/file', origin: 'file', from: `${env.LOCALPUPPET_CONFIG}:1`})
  t.like(await resolveSetting('puppet', undefined, env), {value: '/opt/puppet', from: `${env.LOCALPUPPET_CONFIG}:2`})
  t.like(await resolveSetting('input', undefined, env), {value: '/etc/puppet/input.yaml', origin: 'default'})
  // An empty variable is unset, not an empty path.
  t.like(await resolveSetting('module_dir', undefined, {...env, LOCALPUPPET_MODULE_DIR: ''}), {origin: 'file'})
})

test('lists: a list in the file, split from the environment', async (t) => {
  const env = await configFile(t, 'puppet_args: ["--vardir", "/var/x y"]\ntrust: /etc/k.pem\n')
  t.deepEqual((await resolveSetting('puppet_args', undefined, env)).value, ['--vardir', '/var/x y'])
  t.deepEqual((await resolveSetting('trust', undefined, env)).value, ['/etc/k.pem'])
  t.deepEqual((await resolveSetting('trust', undefined, {...env, LOCALPUPPET_TRUST: '/a.pem:/b'})).value, ['/a.pem', '/b'])
  t.deepEqual((await resolveSetting('puppet_args', undefined, {...env, LOCALPUPPET_PUPPET_ARGS: ' --debug  --trace'})).value, ['--debug', '--trace'])
})

test('every setting is listed, with no file at all', async (t) => {
  const dir = await tempDir(t)
  const settings = await resolveSettings({}, {LOCALPUPPET_CONFIG: undefined, HOME: dir})
  t.deepEqual(settings.map((s) => s.key), ['module_dir', 'state_dir', 'puppet', 'puppet_args', 'source', 'trust', 'input', 'layers_dir', 'metrics_file', 'input_from', 'node_name', 'prometheus', 'repository_id', 'puppetdb', 'puppetdb_ca', 'puppetdb_cert', 'puppetdb_key'])
  t.true(settings.every((s) => s.origin === 'default'))
})

const bad: Array<[string, RegExp]> = [
  ['module_dir: /a\nsourc: https://x\n', /:2: unknown setting "sourc" \(did you mean source\?\)/],
  ['module_dir: relative/dir\n', /:1: module_dir: expected an absolute path/],
  ['\n\nstate_dir: [a]\n', /:3: state_dir: expected a path, got a list/],
  ['puppet_args: --debug\n', /:1: puppet_args: expected a list of strings/],
  ['trust: {a: 1}\n', /:1: trust: expected a path or a list of paths, got a mapping/],
  ['source: 42\n', /:1: source: expected a URL or an absolute directory, got number 42/],
  ['- module_dir\n', /:1: expected a mapping/],
  ['module_dir: /a\nmodule_dir: /b\n', /:2: not valid YAML/],
  ['module_dir: [\n', /not valid YAML/],
  ['repository_id: 6C626B00EA474FC8E5CC308C51971974\n', /:1: repository_id: expected a repository id \(32 hex digits: the repository field of the repository's index\.json\), got string/],
  ['repository_id: [6c626b00ea474fc8e5cc308c51971974]\n', /:1: repository_id: expected a repository id .*, got a list/],
]

for (const [text, message] of bad) {
  test(`a bad file is one 65 naming the key and line: ${JSON.stringify(text)}`, async (t) => {
    const error = await t.throwsAsync(parseConfig(text, '/etc/localpuppet/config.yaml'))
    t.true(error instanceof LocalpuppetError)
    t.is((error as LocalpuppetError).exitCode, 65)
    t.regex(error!.message, message)
    t.regex(error!.message, /^\/etc\/localpuppet\/config\.yaml:\d+: /)
    t.false(error!.message.includes('\n'))
  })
}

test('an empty file, comments only, or a key left empty sets nothing', async (t) => {
  t.deepEqual(await parseConfig('', 'c'), {})
  t.deepEqual(await parseConfig('# nothing\n', 'c'), {})
  t.deepEqual(await parseConfig('source:\n', 'c'), {})
})

test('a file named by LOCALPUPPET_CONFIG must exist (66); the default one may be absent', async (t) => {
  const dir = await tempDir(t)
  const error = await t.throwsAsync(resolveSetting('source', undefined, {LOCALPUPPET_CONFIG: join(dir, 'missing.yaml')}))
  t.is((error as LocalpuppetError).exitCode, 66)
  t.regex(error!.message, /missing\.yaml \(LOCALPUPPET_CONFIG\): not found/)
})
