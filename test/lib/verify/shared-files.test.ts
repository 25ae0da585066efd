import {execFileSync} from 'node:child_process'
import {chmod, mkdir, readFile, readdir, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import test from 'ava'

import {repairRecipe} from '../../../src/lib/verify/shared-files.js'
import {tempDir} from '../../helpers/temp.js'

// The recipe is pasted into a shell as printed: a tag or module dir with shell metacharacters runs nothing,
// and its fetch installs into the module dir verify read, not the default one.
test('the repair recipe pasted into sh removes and fetches exactly the tags named, in the module dir verified', async (t) => {
  const dir = await tempDir(t)
  const moduleDir = join(dir, "mods $(touch pwned-dir) 'q'")
  const tags = ['foo/tags/1.0;touch pwned-tag', 'foo/tags/$(touch pwned-sub)', 'foo/tags/1.5.0']
  for (const tag of tags) await mkdir(join(moduleDir, tag, 'sub'), {recursive: true})
  await chmod(join(moduleDir, tags[2], 'sub'), 0o555)
  const bin = join(dir, 'bin')
  await mkdir(bin)
  await writeFile(join(bin, 'localpuppet'), `#!/bin/sh\nprintf '%s\\n' "$@" > ${JSON.stringify(join(dir, 'argv'))}\n`, {mode: 0o755})
  const recipe = repairRecipe(moduleDir, tags)
  execFileSync('sh', ['-c', recipe.replace(/^to repair: /, '').replace('; then ', '; ')], {cwd: dir, env: {...process.env, PATH: `${bin}:${process.env.PATH}`}})
  t.deepEqual((await readFile(join(dir, 'argv'), 'utf8')).split('\n').slice(0, -1), ['fetch', '--module-dir', moduleDir, ...tags])
  t.deepEqual(await readdir(join(moduleDir, 'foo', 'tags')), [])
  t.deepEqual((await readdir(dir)).filter((name) => name.startsWith('pwned')), [])
})

test('a relative module dir beginning with a dash is named absolute, so find and rm cannot read it as an option', (t) => {
  const recipe = repairRecipe('-mods', ['foo/tags/1.0'])
  const dir = join(process.cwd(), '-mods')
  t.is(recipe, `to repair: find ${dir}/foo/tags/1.0 -type d -exec chmod u+w {} + && rm -rf ${dir}/foo/tags/1.0; then localpuppet fetch --module-dir ${dir} foo/tags/1.0`)
})
