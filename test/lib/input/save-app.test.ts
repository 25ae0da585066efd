import {lstat, mkdir, readFile, stat, symlink, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import test from 'ava'

import {saveInputApp, setInputApp} from '../../../src/lib/input/save-app.js'
import {tempDir} from '../../helpers/temp.js'

const cases: Array<[string, string, string]> = [
  ['plain', 'app: web/tags/1.0.0 # pinned\nclasses: [web]\n', 'app: web/tags/2.0.0 # pinned\nclasses: [web]\n'],
  ['double quotes', '# top\napp: "web/tags/1.0.0"\n', '# top\napp: "web/tags/2.0.0"\n'],
  ['single quotes', "classes: [web]\napp:   'web/tags/1.0.0'   # x\n", "classes: [web]\napp:   'web/tags/2.0.0'   # x\n"],
  ['flow mapping', '{app: web/trunk, classes: [web]}\n', '{app: web/tags/2.0.0, classes: [web]}\n'],
  ['anchor kept', 'app: &a web/trunk\n', 'app: &a web/tags/2.0.0\n'],
  ['CRLF line ends', 'app: web/trunk\r\nclasses: [web]\r\n', 'app: web/tags/2.0.0\r\nclasses: [web]\r\n'],
]

for (const [what, before, after] of cases) {
  test(`setInputApp changes only the value's bytes: ${what}`, (t) => {
    t.is(setInputApp(before, 'web/tags/2.0.0', 'input.yaml'), after)
  })
}

test('a value that cannot stay plain is quoted', (t) => {
  t.is(setInputApp('app: web/trunk\n', 'web@^1.4 #x', 'input.yaml'), 'app: "web@^1.4 #x"\n')
})

test('an app it cannot edit in place is refused with one line', (t) => {
  t.throws(() => setInputApp('base: &b web/trunk\napp: *b\n', 'web/tags/2.0.0', 'input.yaml'), {message: /input\.yaml: --save needs a top-level "app: REF"/})
  t.throws(() => setInputApp('classes: [web]\n', 'web/tags/2.0.0', 'input.yaml'), {message: /--save needs/})
})

test('--save on an input that is a link rewrites the file it leads to, and the link stays', async (t) => {
  const dir = await tempDir(t)
  await mkdir(join(dir, 'nodes'))
  await writeFile(join(dir, 'nodes', 'web01.yaml'), '# web01\napp: foo/tags/1.4.0\n', {mode: 0o640})
  await symlink('nodes/web01.yaml', join(dir, 'input.yaml'))
  t.is(await saveInputApp(join(dir, 'input.yaml'), 'foo/tags/1.5.0'), join(dir, 'input.yaml'))
  t.true((await lstat(join(dir, 'input.yaml'))).isSymbolicLink())
  t.is(await readFile(join(dir, 'nodes', 'web01.yaml'), 'utf8'), '# web01\napp: foo/tags/1.5.0\n')
  t.is((await stat(join(dir, 'nodes', 'web01.yaml'))).mode & 0o777, 0o640)
})
