import {execFileSync} from 'node:child_process'
import {mkdir, readFile, readdir, rm, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import test from 'ava'

import {FAKE_PUPPET, cli, statusJson} from '../helpers/cli.js'
import {demoRepository, keyPair} from '../helpers/repository.js'
import {exists, tempDir} from '../helpers/temp.js'
import {nodeDocument, writeNodeDocument} from '../helpers/node-documents.js'
import {loadSigningKey, signIndex} from '../../src/lib/archive/signature.js'

/*
 * Issue 37: node inputs encrypted to their node. publish stores an age ciphertext for a
 * node with NAME.pub beside its input; the node opens only its own with its key. Refusals:
 * another node's ciphertext, a tampered one (re-signed, so the digest matches), a missing
 * key (78), a plain input among encrypted ones. Puppet is the fake one here: these are
 * about what is accepted and what is kept on disk.
 */

const inputFor = (port: number) => `app: foo/tags/1.4.0\nclasses:\n  foo:\n    port: ${port}\n`

interface Node {
  name: string
  state: string
  input: string
  modules: string
  fake: string
  apply(...extra: string[]): Promise<{exitCode: number; stdout: string; stderr: string}>
  nodeKey(): Promise<string>
}

async function makeNode(dir: string, name: string, repo: string, trust: string): Promise<Node> {
  const home = join(dir, name)
  const config = join(home, 'config.yaml')
  const env = {LOCALPUPPET_CONFIG: config}
  const node: Node = {
    name,
    state: join(home, 'state'),
    input: join(home, 'etc', 'input.yaml'),
    modules: join(home, 'modules'),
    fake: join(home, 'fake'),
    apply: (...extra) => cli(['apply', '--fetch', '--json', ...extra], {env: {...env, FAKE_PUPPET_DIR: node.fake, FAKE_PUPPET_SLEEP: '0'}}),
    async nodeKey() {
      const made = await cli(['node-key', '--json'], {env})
      if (made.exitCode !== 0) throw new Error(made.stderr)
      return JSON.parse(made.stdout).recipient as string
    },
  }
  for (const path of [join(home, 'etc'), node.modules, node.fake, node.state]) await mkdir(path, {recursive: true, mode: 0o755})
  const settings = {module_dir: node.modules, state_dir: node.state, source: repo, trust, input: node.input, input_from: 'repository', node_name: name, puppet: FAKE_PUPPET}
  await writeFile(config, Object.entries(settings).map(([k, v]) => `${k}: ${JSON.stringify(v)}\n`).join(''), {mode: 0o644})
  return node
}

/** A signed demo repository, a directory of node inputs (nodes/) and nodes made on demand. */
async function fleet(t: import('ava').ExecutionContext) {
  const dir = await tempDir(t)
  const {key, pub} = await keyPair(dir, 'release')
  const {repo} = await demoRepository(join(dir, 'build'), key)
  const nodes = join(dir, 'nodes')
  await mkdir(nodes)
  return {
    dir,
    repo,
    key,
    nodes,
    node: (name: string) => makeNode(dir, name, repo, pub),
    publish: (...extra: string[]) => cli(['publish', '--inputs', nodes, '--repo', repo, '--sign', key, ...extra]),
    index: async () => JSON.parse(await readFile(join(repo, 'index.json'), 'utf8')),
  }
}

test('publish stores only ciphertext for a node with NAME.pub, which age --decrypt reads with the node key; the node applies it and keeps only the ciphertext', async (t) => {
  const f = await fleet(t)
  const web1 = await f.node('web1')
  await writeFile(join(f.nodes, 'web1.yaml'), inputFor(8080))
  await writeFile(join(f.nodes, 'web1.pub'), `# web1\n${await web1.nodeKey()}\n`)
  const published = await f.publish()
  t.is(published.exitCode, 0, published.stderr)
  t.regex(published.stdout, /^published input of node web1 \(app foo\/tags\/1\.4\.0\), encrypted$/m)
  const entry = (await f.index()).nodes.web1
  t.is(entry.encrypted, 'age')
  const stored = await readFile(join(f.repo, entry.input), 'utf8')
  t.true(stored.startsWith('-----BEGIN AGE ENCRYPTED FILE-----\n'))
  t.false(stored.includes('8080'))
  t.is(execFileSync('age', ['--decrypt', '-i', join(web1.state, 'keys', 'node.key'), join(f.repo, entry.input)], {encoding: 'utf8'}), inputFor(8080))

  const applied = await web1.apply()
  t.is(applied.exitCode, 0, applied.stderr)
  t.like(JSON.parse(applied.stdout), {state: 'succeeded', release: 'foo/tags/1.4.0'})
  t.is(await readFile(web1.input, 'utf8'), stored, 'the node keeps the ciphertext, never the plain input')
  // Without the repository, the kept ciphertext is opened again.
  const again = await cli(['plan', '--json'], {env: {LOCALPUPPET_CONFIG: join(f.dir, 'web1', 'config.yaml')}})
  t.is(again.exitCode, 0, again.stderr)
  t.is(JSON.parse(again.stdout).release, 'foo/tags/1.4.0')
})

test("a node refuses (65) another node's ciphertext and a tampered one whose digest the index was re-signed for; a missing key is 78; nothing kept or applied", async (t) => {
  const f = await fleet(t)
  const web1 = await f.node('web1')
  const web2 = await f.node('web2')
  await web2.nodeKey()
  await writeFile(join(f.nodes, 'web2.yaml'), inputFor(9090))
  // web2's input encrypted to web1's key (a wrong NAME.pub): web2 cannot open it.
  await writeFile(join(f.nodes, 'web2.pub'), `${await web1.nodeKey()}\n`)
  t.is((await f.publish()).exitCode, 0)
  const other = await web2.apply()
  t.is(other.exitCode, 65, other.stderr)
  t.regex(JSON.parse(other.stdout).error.message, /input of node web2\): encrypted input not encrypted to this node's key \(age1[a-z0-9]+\): another node's input, or published before this node was re-keyed; refused, nothing applied$/)
  t.false(await exists(web2.input), 'nothing kept')
  t.false(await exists(join(web2.fake, 'args')), 'puppet not started')

  // web2's own key now; then one byte of the ciphertext is changed and the index re-signed to match.
  await writeFile(join(f.nodes, 'web2.pub'), `${await web2.nodeKey()}\n`)
  t.is((await f.publish()).exitCode, 0)
  const index = await f.index()
  const file = join(f.repo, index.nodes.web2.input)
  const lines = (await readFile(file, 'utf8')).split('\n')
  const body = lines.length - 3
  lines[body] = lines[body].slice(0, 5) + (lines[body][5] === 'A' ? 'B' : 'A') + lines[body].slice(6)
  const tampered = Buffer.from(lines.join('\n'))
  const {createHash} = await import('node:crypto')
  const sha256 = createHash('sha256').update(tampered).digest('hex')
  const path = `inputs/web2/${sha256}.yaml`
  await writeFile(join(f.repo, path), tampered)
  index.nodes.web2 = {...index.nodes.web2, input: path, sha256, size: tampered.length}
  const bytes = Buffer.from(JSON.stringify({...index, version: index.version + 1}))
  await writeFile(join(f.repo, 'index.json.sig'), signIndex(bytes, await loadSigningKey(f.key)))
  await writeFile(join(f.repo, 'index.json'), bytes)
  // And its own document (what web2 reads once it accepted one), re-signed to match.
  const document = await nodeDocument(f.repo, 'web2')
  await writeNodeDocument(f.repo, 'web2', {json: {...document.json, version: document.json.version + 1, input: index.nodes.web2}}, f.key)
  const bad = await web2.apply()
  t.is(bad.exitCode, 65, bad.stderr)
  t.regex(JSON.parse(bad.stdout).error.message, /encrypted input (does not authenticate \(damaged or tampered\)|not a readable age file); refused, nothing applied$/)
  t.false(await exists(web2.input))

  // web1's input, and web1's key gone: 78, its own code, nothing kept.
  await writeFile(join(f.nodes, 'web1.yaml'), inputFor(8080))
  await writeFile(join(f.nodes, 'web1.pub'), `${await web1.nodeKey()}\n`)
  await rm(join(f.nodes, 'web2.yaml'))
  t.is((await f.publish()).exitCode, 0)
  await rm(join(web1.state, 'keys', 'node.key'))
  const keyless = await web1.apply()
  t.is(keyless.exitCode, 78, keyless.stderr)
  t.regex(JSON.parse(keyless.stdout).error.message, /^node key .*keys\/node\.key: missing; this node cannot open its encrypted input$/)
  t.false(await exists(web1.input))
  t.false(await exists(join(web1.fake, 'args')))
  t.like((await statusJson(web1.state)).record, {state: 'refused', exitCode: 78})
})

test('a plain input to a repository with encrypted ones is refused (65) unless --allow-plain-input; a re-keyed node and a rotated operator recipient get a fresh encryption at the next publish', async (t) => {
  const f = await fleet(t)
  const web1 = await f.node('web1')
  await writeFile(join(f.nodes, 'web1.yaml'), inputFor(8080))
  await writeFile(join(f.nodes, 'web1.pub'), `${await web1.nodeKey()}\n`)
  const ops = join(f.dir, 'ops.key')
  execFileSync('age-keygen', ['-o', ops], {stdio: 'ignore'})
  const opsRecipient = execFileSync('age-keygen', ['-y', ops], {encoding: 'utf8'}).trim()
  t.is((await f.publish('--recipient', opsRecipient)).exitCode, 0)
  const first = (await f.index()).nodes.web1
  t.is(execFileSync('age', ['--decrypt', '-i', ops, join(f.repo, first.input)], {encoding: 'utf8'}), inputFor(8080), 'the operator reads it (break-glass)')

  await writeFile(join(f.nodes, 'db1.yaml'), inputFor(5432))
  const refused = await f.publish()
  t.is(refused.exitCode, 65)
  t.regex(refused.stderr, /node db1: its input would be published in plain text \(no .*db1\.pub\) to a repository whose node inputs are encrypted \(web1\); nothing published/)
  t.deepEqual((await f.index()).nodes.web1, first, 'nothing published')
  t.is((await f.publish('--allow-plain-input')).exitCode, 0)
  t.is((await f.index()).nodes.db1.encrypted, undefined)
  await rm(join(f.nodes, 'db1.yaml'))

  // web1 rebuilt: a new key; the next publish encrypts to it (and no longer to the old operator).
  await rm(join(web1.state, 'keys', 'node.key'))
  await writeFile(join(f.nodes, 'web1.pub'), `${await web1.nodeKey()}\n`)
  const ops2 = join(f.dir, 'ops2.key')
  execFileSync('age-keygen', ['-o', ops2], {stdio: 'ignore'})
  await writeFile(join(f.dir, 'ops.pub'), execFileSync('age-keygen', ['-y', ops2], {encoding: 'utf8'}))
  const republished = await f.publish('--recipients-file', join(f.dir, 'ops.pub'))
  t.is(republished.exitCode, 0, republished.stderr)
  t.regex(republished.stdout, /^updated input of node web1 \(app foo\/tags\/1\.4\.0\), encrypted$/m)
  const second = (await f.index()).nodes.web1
  t.not(second.sha256, first.sha256)
  t.is(execFileSync('age', ['--decrypt', '-i', ops2, join(f.repo, second.input)], {encoding: 'utf8'}), inputFor(8080))
  t.throws(() => execFileSync('age', ['--decrypt', '-i', ops, join(f.repo, second.input)], {stdio: 'pipe'}), undefined, 'the rotated operator key no longer reads it')
  const applied = await web1.apply()
  t.is(applied.exitCode, 0, applied.stderr)
  t.true((await readdir(web1.modules)).length > 0)
})

test('a NAME.pub or --recipient that is no age recipient is refused (65) naming it, nothing published', async (t) => {
  const f = await fleet(t)
  await writeFile(join(f.nodes, 'web1.yaml'), inputFor(8080))
  await writeFile(join(f.nodes, 'web1.pub'), 'ssh-ed25519 AAAA web1\n')
  const bad = await f.publish()
  t.is(bad.exitCode, 65)
  t.regex(bad.stderr, /recipients of node web1 .*web1\.pub:1: "ssh-ed25519 AAAA web1" is not an age recipient/)
  await writeFile(join(f.nodes, 'web1.pub'), '# nothing\n')
  t.regex((await f.publish()).stderr, /web1\.pub: lists no age recipient/)
  const flag = await f.publish('--recipient', 'age1nope')
  t.is(flag.exitCode, 65)
  t.regex(flag.stderr, /--recipient "age1nope": not an age recipient/)
  t.is((await f.index()).nodes, undefined)
})
