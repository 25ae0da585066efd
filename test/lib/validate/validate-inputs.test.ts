import {copyFile, mkdir, readdir} from 'node:fs/promises'
import {join} from 'node:path'

import test from 'ava'

import {validateInputs} from '../../../src/lib/validate/validate-inputs.js'
import {FIXTURES, cli} from '../../helpers/cli.js'
import {installEdited} from '../../helpers/repository.js'
import {exists, tempDir, writeTree} from '../../helpers/temp.js'

const CI = join(FIXTURES, 'ci')
/** No main manifest, whatever this machine has at Puppet's default path. */
const options = (moduleDir: string) => ({moduleDir, puppet: null, defaultManifest: '/nonexistent/site.pp'})

test('validate of many inputs gives each input the report it gets alone: same checks, problems and messages', async (t) => {
  const dir = await tempDir(t)
  // Each fixture input three times over: many inputs on the same releases, good and bad alike.
  const files: string[] = []
  for (const name of (await readdir(join(CI, 'inputs'))).sort()) {
    for (const copy of [1, 2, 3]) {
      const file = join(dir, `${copy}-${name}`)
      await copyFile(join(CI, 'inputs', name), file)
      files.push(file)
    }
  }

  const together = await validateInputs([dir], options(join(CI, 'modules')))
  t.is(together.inputs.length, files.length)
  for (const file of files) {
    const alone = await validateInputs([file], options(join(CI, 'modules')))
    t.deepEqual(
      together.inputs.find((input) => input.file === file),
      alone.inputs[0],
      file,
    )
  }

  // The fixtures hold ten problems, each now three times; the syntax error needs Puppet (--puppet none).
  t.is(together.problems, 27)
})

test('a release refused for its tree, and a tag modified since install, are reported for every input that names them', async (t) => {
  const dir = await tempDir(t)
  const modules = join(dir, 'modules')
  await installEdited(dir, join(CI, 'modules'), 'web/tags/1.0.0', modules, 'web/manifests/init.pp')
  await writeTree(modules, {
    'linked/tags/1.0.0/linked/manifests/init.pp': 'class linked {}\n',
    'linked/tags/1.0.0/linked/files/passwd': {symlink: '/etc/passwd'},
  })
  const inputs = join(dir, 'inputs')
  const tree: Record<string, string> = {}
  for (const n of [1, 2, 3]) {
    tree[`web${n}.yaml`] = 'app: web/tags/1.0.0\nclasses: [web]\n'
    tree[`linked${n}.yaml`] = 'app: linked/tags/1.0.0\nclasses: [linked]\n'
  }

  await writeTree(inputs, tree)
  const report = await validateInputs([inputs], options(modules))
  const problems = Object.fromEntries(report.inputs.map((input) => [input.file.slice(inputs.length + 1), input.problems.map((p) => [p.check, p.message])]))
  for (const n of [1, 2, 3]) {
    t.deepEqual(problems[`web${n}.yaml`], [['release', `${join(inputs, `web${n}.yaml`)}:1: web/tags/1.0.0/web/manifests/init.pp: modified since install`]])
    t.deepEqual(problems[`linked${n}.yaml`], [['release', `${join(inputs, `linked${n}.yaml`)}:1: linked/tags/1.0.0/linked/files/passwd: a symbolic link; a release may hold only regular files and directories`]])
  }

  t.is(report.problems, 6)
})

test('validate writes nothing: an installed tag it verifies gets no verification keys (.localpuppet/verified), which plan and apply keep', async (t) => {
  const dir = await tempDir(t)
  const modules = join(dir, 'modules')
  await mkdir(modules)
  const archive = join(dir, 'web.tar.gz')
  for (const args of [['pack', 'web/tags/1.0.0', '--module-dir', join(CI, 'modules'), '-o', archive], ['install', archive, '--module-dir', modules]]) {
    t.is((await cli(args)).exitCode, 0, args[0])
  }

  await writeTree(dir, {'web.yaml': 'app: web/tags/1.0.0\nclasses: [web]\n'})
  const report = await validateInputs([join(dir, 'web.yaml')], options(modules))
  t.deepEqual(report.inputs[0].problems, [])
  t.false(await exists(join(modules, '.localpuppet', 'verified')))
})
