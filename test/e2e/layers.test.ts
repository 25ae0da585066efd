import {chmod, mkdir, readFile, rename, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import Ajv2020 from 'ajv/dist/2020.js'
import test, {type ExecutionContext} from 'ava'

import {REPO, cli, isolatePuppet, statusJson} from '../helpers/cli.js'
import {keyPair} from '../helpers/repository.js'
import {tempDir, writeTree} from '../helpers/temp.js'

// Layered node inputs (issue 36), applied by real Puppet: whichever runs these tests, Debian
// 12's 7.23 on the host, Debian 13's 8.10 in bin/debian13's chroot. Each assertion holds on both.

/** Release web 1.0.0: class web takes $greeting; its own layer sets the defaults every node of web gets. */
const WEB_1 = {
  'web/tags/1.0.0/web/manifests/init.pp': 'class web(String $greeting, String $out, Integer $port = 1) {\n  file { $out: content => "${greeting} port=${port} dc=${::datacenter} tier=${::tier}\\n" }\n}\n',
  'web/tags/1.0.0/layer.yaml': '# web 1.0.0: how its classes are meant to be called\nclasses:\n  web:\n    greeting: hello\n    port: 80\nparameters:\n  tier: standard\n  datacenter: none\n',
}

/** Release web 2.0.0 renames $greeting to $message; its own layer moves with it. */
const WEB_2 = {
  'web/tags/2.0.0/web/manifests/init.pp': 'class web(String $message, String $out, Integer $port = 1) {\n  file { $out: content => "${message} port=${port} dc=${::datacenter} tier=${::tier}\\n" }\n}\n',
  'web/tags/2.0.0/layer.yaml': 'classes:\n  web:\n    message: hello from 2.0\n    port: 80\nparameters:\n  tier: standard\n  datacenter: none\n',
}

const SITE = 'classes:\n  web:\n    port: 8080\nparameters:\n  datacenter: dc1\n'
const nodeInput = (app: string, out: string) => `app: ${app}\nlayers: [site/dc1]\nclasses:\n  web:\n    out: ${out}\nparameters:\n  tier: gold\n`

async function workspace(t: ExecutionContext) {
  const dir = await tempDir(t)
  await chmod(dir, 0o755)
  await writeTree(dir, {'modules/.keep': '', 'git/layers/site/dc1.yaml': SITE})
  return {dir, modules: join(dir, 'modules'), state: join(dir, 'state'), out: join(dir, 'out.txt')}
}

test('the release layer supplies defaults, a site layer and the node override them; real Puppet applies the merge and plan names every origin', async (t) => {
  const {dir, modules, state, out} = await workspace(t)
  await writeTree(modules, WEB_1)
  const input = join(dir, 'git/web1.yaml')
  await writeFile(input, nodeInput('web/tags/1.0.0', out))

  const plan = await cli(['plan', input, '--module-dir', modules, '--state-dir', state])
  t.is(plan.exitCode, 0, plan.stderr)
  t.regex(plan.stdout, /^ {4}greeting +release web\/tags\/1\.0\.0 +web\/tags\/1\.0\.0\/layer\.yaml:4$/m)
  t.regex(plan.stdout, new RegExp(`^ {4}port +site/dc1 +${join(dir, 'git/layers/site/dc1.yaml')}:3$`, 'm'))
  t.regex(plan.stdout, new RegExp(`^ {2}parameter tier +node +${input}:7$`, 'm'))
  const json = JSON.parse((await cli(['plan', input, '--module-dir', modules, '--state-dir', state, '--json'])).stdout)
  t.deepEqual(json.layers.origins.classes.web.parameters.out, {layer: 'node', file: input, line: 5})
  t.deepEqual(json.layers.layers.map((layer: {name: string}) => layer.name), ['release web/tags/1.0.0', 'site/dc1', 'node'])
  // plan --json of a layered input is still what the documented schema allows.
  const schema = JSON.parse(await readFile(join(REPO, 'integrations/schema/plan.schema.json'), 'utf8'))
  const validate = new Ajv2020.default({allErrors: true, strict: true}).compile(schema)
  t.true(validate(json), JSON.stringify(validate.errors))

  const applied = await cli(['apply', input, '--module-dir', modules, '--state-dir', state, '--', ...isolatePuppet(dir)])
  t.is(applied.exitCode, 0, applied.stderr)
  t.is(await readFile(out, 'utf8'), 'hello port=8080 dc=dc1 tier=gold\n')
  const {record} = await statusJson(state)
  t.deepEqual(record.layers.document.classes.web, {greeting: 'hello', port: 8080, out})

  // enc prints the same computed document, with no run.
  const enc = await cli(['enc', input, '--module-dir', modules])
  t.is(enc.exitCode, 0, enc.stderr)
  t.is(enc.stdout, `classes:\n  web:\n    greeting: hello\n    port: 8080\n    out: ${out}\nparameters:\n  tier: gold\n  datacenter: dc1`)
})

test('from the signed repository: layers verified by digest; release 2.0 renames a parameter and a channel promotion takes it with no input edited; a changed layer makes the next --if-changed run run', async (t) => {
  const {dir, modules, state, out} = await workspace(t)
  const build = join(dir, 'build')
  await writeTree(build, {...WEB_1, ...WEB_2})
  const {key, pub} = await keyPair(dir, 'release')
  const repo = join(dir, 'repo')
  const archives = []
  for (const tag of ['1.0.0', '2.0.0']) {
    const archive = join(dir, `web-${tag}.tar.gz`)
    const packed = await cli(['pack', `web/tags/${tag}`, '--module-dir', build, '-o', archive, '--sign', key])
    t.is(packed.exitCode, 0, packed.stderr)
    archives.push(archive)
  }

  t.is((await cli(['publish', ...archives, '--repo', repo, '--sign', key])).exitCode, 0)
  t.is((await cli(['promote', 'web/tags/1.0.0', '--channel', 'stable', '--repo', repo, '--sign', key])).exitCode, 0)
  await writeTree(dir, {'git/nodes/web1.yaml': nodeInput('web/channels/stable', out)})
  const published = await cli(['publish', '--layers', join(dir, 'git/layers'), '--inputs', join(dir, 'git/nodes'), '--repo', repo, '--sign', key])
  t.is(published.exitCode, 0, published.stderr)
  t.regex(published.stdout, /^published layer site\/dc1$/m)
  const index = JSON.parse(await readFile(join(repo, 'index.json'), 'utf8'))
  t.regex(index.layers['site/dc1'].layer, /^layers\/site\/dc1\/[0-9a-f]{64}\.yaml$/)

  // The node: its input and layers from the repository.
  await mkdir(join(dir, 'node/etc'), {recursive: true, mode: 0o755})
  const config = join(dir, 'node/config.yaml')
  const settings = {module_dir: modules, state_dir: state, source: repo, trust: pub, input: join(dir, 'node/etc/input.yaml'), input_from: 'repository', node_name: 'web1'}
  await writeFile(config, Object.entries(settings).map(([k, v]) => `${k}: ${JSON.stringify(v)}\n`).join(''))
  const apply = (...flags: string[]) => cli(['apply', '--fetch', ...flags, '--', ...isolatePuppet(dir)], {env: {LOCALPUPPET_CONFIG: config}})

  // publish --computed: web2's input stored with its layers merged in (no layer of its own to fetch, none of another node's).
  const out2 = join(dir, 'out2.txt')
  await writeTree(dir, {'git/computed/web2.yaml': nodeInput('web/channels/stable', out2)})
  const computed = await cli(['publish', '--computed', '--layers', join(dir, 'git/layers'), '--inputs', join(dir, 'git/computed'), '--repo', repo, '--sign', key])
  t.is(computed.exitCode, 0, computed.stderr)
  const web2 = JSON.parse(await readFile(join(repo, 'index.json'), 'utf8')).nodes.web2
  t.is(await readFile(join(repo, web2.input), 'utf8'), `app: web/channels/stable\nclasses:\n  web:\n    port: 8080\n    out: ${out2}\nparameters:\n  datacenter: dc1\n  tier: gold\n`)
  // What web2 gets from the repository, merged over its release's own layer: enc --fetch, nothing run.
  const enc2 = await cli(['enc', '--fetch'], {env: {LOCALPUPPET_CONFIG: config, LOCALPUPPET_NODE_NAME: 'web2'}})
  t.is(enc2.exitCode, 0, enc2.stderr)
  t.is(enc2.stdout, `classes:\n  web:\n    greeting: hello\n    port: 8080\n    out: ${out2}\nparameters:\n  tier: gold\n  datacenter: dc1`)

  const first = await apply()
  t.is(first.exitCode, 0, first.stderr)
  t.is(await readFile(out, 'utf8'), 'hello port=8080 dc=dc1 tier=gold\n')
  t.is(await readFile(join(dir, 'node/etc/layers/site/dc1.yaml'), 'utf8'), SITE, 'the layer is kept beside the input')

  // Without the repository, the node merges the layers it kept from it, whatever layers_dir says.
  await rename(repo, `${repo}.away`)
  const offline = await cli(['plan', '--fetch', '--json'], {env: {LOCALPUPPET_CONFIG: config, LOCALPUPPET_LAYERS_DIR: join(dir, 'elsewhere')}})
  await rename(`${repo}.away`, repo)
  t.is(offline.exitCode, 0, offline.stderr)
  t.regex(offline.stderr, /applying web\/tags\/1\.0\.0 as installed here/)
  t.deepEqual(JSON.parse(offline.stdout).layers.layers.map((layer: {file: string}) => layer.file), ['web/tags/1.0.0/layer.yaml', join(dir, 'node/etc/layers/site/dc1.yaml'), join(dir, 'node/etc/input.yaml')])

  // A layer changed in the repository behind the node's back: refused by digest, nothing applied.
  const stored = join(repo, index.layers['site/dc1'].layer)
  await writeFile(stored, SITE.replace('8080', '9999'))
  const tampered = await apply()
  t.is(tampered.exitCode, 65)
  t.regex(tampered.stderr, /layer site\/dc1 does not match the signed index/)
  await writeFile(stored, SITE)

  // Release 2.0 renames greeting to message: its own layer moves with it; promoted, no node input edited.
  t.is((await cli(['promote', 'web/tags/2.0.0', '--channel', 'stable', '--repo', repo, '--sign', key])).exitCode, 0)
  const second = await apply('--if-changed')
  t.is(second.exitCode, 0, second.stderr)
  t.is(await readFile(out, 'utf8'), 'hello from 2.0 port=8080 dc=dc1 tier=gold\n')
  t.is((await statusJson(state)).record.release, 'web/tags/2.0.0')

  const skipped = await apply('--if-changed')
  t.is(skipped.exitCode, 0, skipped.stderr)
  t.is((await statusJson(state)).record.state, 'skipped')

  // The site layer changes in the repository: the node's next --if-changed run runs.
  await writeFile(join(dir, 'git/layers/site/dc1.yaml'), SITE.replace('8080', '8443'))
  t.is((await cli(['publish', '--layers', join(dir, 'git/layers'), '--repo', repo, '--sign', key])).exitCode, 0)
  const third = await apply('--if-changed')
  t.is(third.exitCode, 0, third.stderr)
  t.is((await statusJson(state)).record.state, 'succeeded')
  t.is(await readFile(out, 'utf8'), 'hello from 2.0 port=8443 dc=dc1 tier=gold\n')
})
