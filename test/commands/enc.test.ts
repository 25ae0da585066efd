import {chmod, mkdir} from 'node:fs/promises'
import {join} from 'node:path'

import {runCommand} from '@oclif/test'
import test from 'ava'

import {tempDir, writeTree} from '../helpers/temp.js'

// runCommand patches stdout globally: these run one at a time.
const root = new URL('../..', import.meta.url).pathname

test.serial("enc shows a layer's bidirectional override and zero-width characters escaped, never raw: --json keeps them exact", async (t) => {
  const dir = await tempDir(t)
  await chmod(dir, 0o755)
  // U+202E reverses what follows on a terminal: the printed value would read as another one.
  await writeTree(dir, {
    'modules/web/tags/1.0.0/web/manifests/init.pp': 'class web(String $motd) {}\n',
    'git/layers/site/dc1.yaml': 'classes:\n  web:\n    motd: "ok \u202Eevil\u200B"\n',
    'git/web1.yaml': 'app: web/tags/1.0.0\nlayers: [site/dc1]\n',
  })
  await mkdir(join(dir, 'state'))
  const args = ['enc', join(dir, 'git/web1.yaml'), '--module-dir', join(dir, 'modules'), '--state-dir', join(dir, 'state')]
  const shown = await runCommand(args, {root})
  t.is(shown.error, undefined, shown.stderr)
  t.regex(shown.stdout, /motd: ok \\u202eevil\\u200b$/m)
  t.notRegex(shown.stdout, /[\u202E\u200B]/)
  const json = await runCommand([...args, '--json'], {root})
  t.is(JSON.parse(json.stdout).document.classes.web.motd, 'ok \u202Eevil\u200B')
})
