import {existsSync} from 'node:fs'
import {appendFile, chmod, cp, mkdir} from 'node:fs/promises'
import {join} from 'node:path'

import test from 'ava'
import {execa} from 'execa'

import {BIN, FAKE_PUPPET, FIXTURES, cli, isolatePuppet} from '../helpers/cli.js'
import {tempDir} from '../helpers/temp.js'

const DEMO = join(FIXTURES, 'demo')

test('pack, install into an empty module dir, apply with real puppet', async (t) => {
  const dir = await tempDir(t)
  const archive = join(dir, 'foo.tar.gz')
  const packed = await cli(['pack', 'foo@^1.4', '--module-dir', join(DEMO, 'modules'), '-o', archive, '--json'])
  t.is(packed.exitCode, 0, packed.stderr)
  t.is(JSON.parse(packed.stdout).release, 'foo/tags/1.4.0')

  const modules = join(dir, 'modules')
  await mkdir(modules)
  const installed = await cli(['install', archive, '--module-dir', modules])
  t.is(installed.exitCode, 0, installed.stderr)
  t.is(installed.stdout, 'installed dist/tags/2.0.1\ninstalled foo/tags/1.4.0')

  const applied = await cli(['apply', join(DEMO, 'input.yaml'), '--module-dir', modules, '--state-dir', join(dir, 'state'), '--', ...isolatePuppet(dir)])
  t.is(applied.exitCode, 0, applied.stderr)
  t.regex(applied.stdout, /Notice: I notify you!/)
  t.regex(applied.stdout, /Notice: platform class/)

  const verified = await cli(['verify', '--module-dir', modules])
  t.is(verified.exitCode, 0)
  t.is(verified.stdout, 'ok        dist/tags/2.0.1\nok        foo/tags/1.4.0')
  const releases = JSON.parse((await cli(['releases', '--module-dir', modules, '--json'])).stdout)
  t.deepEqual(releases.map((app: {app: string; tags: Array<{tag: string; verified: boolean}>}) => [app.app, app.tags.map((tag) => [tag.tag, tag.verified])]), [
    ['dist', [['2.0.1', true]]],
    ['foo', [['1.4.0', true]]],
  ])
})

test('pack -o - streams to install - through a pipe', async (t) => {
  const dir = await tempDir(t)
  const modules = join(dir, 'modules')
  await mkdir(modules)
  const result = await execa('sh', ['-c', `node "${BIN}" pack foo/tags/1.3.0 --module-dir "${join(DEMO, 'modules')}" -o - | node "${BIN}" install - --module-dir "${modules}"`], {reject: false})
  t.is(result.exitCode, 0, result.stderr)
  t.true(existsSync(join(modules, 'foo/tags/1.3.0/foo/manifests/init.pp')))
})

test('apply refuses a tampered installed tag before puppet starts, naming the file', async (t) => {
  const dir = await tempDir(t)
  const archive = join(dir, 'foo.tar.gz')
  t.is((await cli(['pack', 'foo/tags/1.4.0', '--module-dir', join(DEMO, 'modules'), '-o', archive])).exitCode, 0)
  const modules = join(dir, 'modules')
  await mkdir(modules)
  t.is((await cli(['install', archive, '--module-dir', modules])).exitCode, 0)
  const file = join(modules, 'dist/tags/2.0.1/platform/manifests/init.pp')
  await chmod(file, 0o644)
  await appendFile(file, "notify { 'injected': }\n")

  const fake = join(dir, 'fake')
  await mkdir(fake)
  const args = ['apply', join(DEMO, 'input.yaml'), '--module-dir', modules, '--state-dir', join(dir, 'state'), '--puppet', FAKE_PUPPET]
  const refused = await cli(args, {env: {FAKE_PUPPET_DIR: fake}})
  t.is(refused.exitCode, 65)
  t.regex(refused.stderr, /^localpuppet: dist\/tags\/2\.0\.1\/platform\/manifests\/init\.pp: modified since install$/m)
  t.false(existsSync(join(fake, 'puppet.pid')), 'puppet never started')
  const status = await cli(['status', '--state-dir', join(dir, 'state'), '--json'])
  t.is(status.exitCode, 1, 'the refused attempt is the node\'s state')
  t.like(JSON.parse(status.stdout), {state: 'refused', exitCode: 65, error: 'dist/tags/2.0.1/platform/manifests/init.pp: modified since install', lastCompleted: null})
  const plan = await cli(['plan', join(DEMO, 'input.yaml'), '--module-dir', modules])
  t.is(plan.exitCode, 65)
  const verify = await cli(['verify', 'dist/tags/2.0.1', '--module-dir', modules])
  t.is(verify.exitCode, 65)
  t.is(verify.stdout, 'MISMATCH  dist/tags/2.0.1\n  modified  platform/manifests/init.pp')
  t.regex(verify.stderr, /^localpuppet: warning: to repair: find \S+\/dist\/tags\/2\.0\.1'? -type d -exec chmod u\+w \{\} \+ && rm -rf \S+\/dist\/tags\/2\.0\.1'?; then localpuppet fetch --module-dir \S+ dist\/tags\/2\.0\.1$/m)
})

test('an archive signed with an OpenSSL Ed25519 key installs only where that key is trusted', async (t) => {
  const dir = await tempDir(t)
  const key = join(dir, 'release-key.pem')
  const pub = join(dir, 'release-key.pub.pem')
  const other = join(dir, 'other.pem')
  const otherPub = join(dir, 'other.pub.pem')
  for (const [priv, pubOut] of [[key, pub], [other, otherPub]]) {
    await execa('openssl', ['genpkey', '-algorithm', 'ed25519', '-out', priv])
    await execa('openssl', ['pkey', '-in', priv, '-pubout', '-out', pubOut])
  }

  const signed = join(dir, 'signed.tar.gz')
  const unsigned = join(dir, 'unsigned.tar.gz')
  t.is((await cli(['pack', 'foo/tags/1.4.0', '--module-dir', join(DEMO, 'modules'), '-o', signed, '--sign', key])).exitCode, 0)
  t.is((await cli(['pack', 'foo/tags/1.4.0', '--module-dir', join(DEMO, 'modules'), '-o', unsigned])).exitCode, 0)
  const install = async (archive: string, trust: string) => {
    const modules = join(dir, `modules-${Math.random().toString(16).slice(2)}`)
    await mkdir(modules)
    return {modules, result: await cli(['install', archive, '--module-dir', modules, '--trust', trust])}
  }

  const good = await install(signed, pub)
  t.is(good.result.exitCode, 0, good.result.stderr)
  t.regex(good.result.stdout, /signature verified: sha256:[0-9a-f]{64}/)
  const wrongKey = await install(signed, otherPub)
  t.is(wrongKey.result.exitCode, 65)
  t.regex(wrongKey.result.stderr, /does not verify with any trusted key/)
  t.false(existsSync(join(wrongKey.modules, 'foo')))
  // A directory of trusted keys holds public keys only (a private key there is refused, 64).
  const keys = join(dir, 'keys')
  await mkdir(keys)
  await cp(pub, join(keys, 'release-key.pub.pem'))
  const notSigned = await install(unsigned, keys)
  t.is(notSigned.result.exitCode, 65)
  t.regex(notSigned.result.stderr, /not signed, and trusted keys are configured/)
  const notEd25519 = join(dir, 'rsa.pem')
  await execa('openssl', ['genpkey', '-algorithm', 'rsa', '-pkeyopt', 'rsa_keygen_bits:1024', '-out', notEd25519])
  const rsa = await cli(['pack', 'foo/tags/1.4.0', '--module-dir', join(DEMO, 'modules'), '-o', join(dir, 'x.tar.gz'), '--sign', notEd25519])
  t.is(rsa.exitCode, 64)
  t.regex(rsa.stderr, /--sign needs Ed25519/)
})
