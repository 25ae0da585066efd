import {chown, readFile, readdir, mkdir, rm, writeFile} from 'node:fs/promises'
import {createHash} from 'node:crypto'
import {dirname, join} from 'node:path'

import test from 'ava'

import {FAKE_PUPPET, cli, statusJson} from '../helpers/cli.js'
import {DEMO_MODULES, demoRepository, keyPair} from '../helpers/repository.js'
import {smallFileSystem} from '../helpers/full-disk.js'
import {exists, tempDir} from '../helpers/temp.js'
import {nodeDocument, writeNodeDocument} from '../helpers/node-documents.js'
import {loadSigningKey, signIndex} from '../../src/lib/archive/signature.js'
import {runDir} from '../../src/lib/state/state-dir.js'

/*
 * A node whose input comes from the repository (input_from: repository) takes only its own
 * input, only as the signed index lists it: a tampered input, an index entry pointing it at
 * another node's input, or an unsigned index while keys are trusted is refused (65), nothing
 * is applied or kept, and the attempt is recorded as refused. The repository is read from
 * disk and puppet is the fake one: these are about what is accepted, not how it is served.
 */

interface Node {
  config: string
  state: string
  input: string
  modules: string
  fake: string
  apply(): Promise<{exitCode: number; stdout: string; stderr: string}>
}

async function makeNode(dir: string, name: string, settings: {repo: string; trust?: string; metrics?: string}): Promise<Node> {
  const home = join(dir, name)
  const node: Node = {
    config: join(home, 'config.yaml'),
    state: join(home, 'state'),
    input: join(home, 'etc', 'input.yaml'),
    modules: join(home, 'modules'),
    fake: join(home, 'fake'),
    apply: () => cli(['apply', '--fetch', '--json'], {env: {LOCALPUPPET_CONFIG: node.config, FAKE_PUPPET_DIR: node.fake, FAKE_PUPPET_SLEEP: '0'}}),
  }
  for (const path of [join(home, 'etc'), node.modules, node.fake]) await mkdir(path, {recursive: true, mode: 0o755})
  const lines = {
    module_dir: node.modules,
    state_dir: node.state,
    source: settings.repo,
    ...(settings.trust ? {trust: settings.trust} : {}),
    input: node.input,
    input_from: 'repository',
    node_name: name,
    puppet: FAKE_PUPPET,
    ...(settings.metrics ? {metrics_file: settings.metrics} : {}),
  }
  await writeFile(node.config, Object.entries(lines).map(([k, v]) => `${k}: ${JSON.stringify(v)}\n`).join(''), {mode: 0o644})
  return node
}

const inputFor = (app: string, port: number) => `app: ${app}\nclasses:\n  foo:\n    port: ${port}\n`

/**
 * A signed demo repository with web1's input (foo 1.4.0, or `channel` after foo 1.4.0 is
 * promoted to it) published, and node NAME reading it (writing `metrics`, a metrics file,
 * when asked); `publish` publishes web1's input anew.
 */
async function publishedWeb1(
  t: import('ava').ExecutionContext,
  name: string,
  options: {channel?: string; metrics?: boolean} = {},
): Promise<Node & {repo: string; key: string; metrics: string; publish(input: string): Promise<void>}> {
  const dir = await tempDir(t)
  const {key, pub} = await keyPair(dir, 'release')
  const {repo} = await demoRepository(join(dir, 'build'), key)
  if (options.channel) t.is((await cli(['promote', 'foo/tags/1.4.0', '--channel', options.channel, '--repo', repo, '--sign', key])).exitCode, 0)
  const publish = async (input: string) => {
    await writeFile(join(dir, 'web1.yaml'), input)
    const published = await cli(['publish', '--node', 'web1', '--input', join(dir, 'web1.yaml'), '--repo', repo, '--sign', key])
    t.is(published.exitCode, 0, published.stderr)
  }

  await publish(inputFor(options.channel ? `foo/channels/${options.channel}` : 'foo/tags/1.4.0', 8080))
  const metrics = join(dir, 'metrics', 'localpuppet.prom')
  return {...(await makeNode(dir, name, {repo, trust: pub, metrics: options.metrics ? metrics : undefined})), repo, key, metrics, publish}
}

/** Refused, nothing kept or applied: 65 naming why, the input file as it was, puppet not started, the module dir as it was. */
async function assertRefused(t: import('ava').ExecutionContext, node: Node, message: RegExp, before: {input: string | null; modules: string[]; lastCompleted: string | null}) {
  await rm(join(node.fake, 'args'), {force: true})
  const result = await node.apply()
  t.is(result.exitCode, 65, result.stderr)
  // --json: the error is the JSON on stdout.
  t.regex(JSON.parse(result.stdout).error.message, message)
  t.is(await readFile(node.input, 'utf8').catch(() => null), before.input, 'the input file is left as it was')
  t.false(await exists(join(node.fake, 'args')), 'puppet was not started')
  t.deepEqual((await readdir(node.modules)).sort(), before.modules, 'nothing installed')
  const {record} = await statusJson(node.state)
  t.like(record, {state: 'refused', exitCode: 65})
  t.regex(record.error, message)
  t.is(record.lastCompleted?.id ?? null, before.lastCompleted)
}

test('a node input changed by one byte in the repository is refused (65): nothing kept, nothing applied, the attempt recorded as refused', async (t) => {
  const node = await publishedWeb1(t, 'web1', {channel: 'stable'})
  const {repo} = node

  // First the published input as it is: kept and applied.
  const good = await node.apply()
  t.is(good.exitCode, 0, good.stderr)
  t.like(JSON.parse(good.stdout), {state: 'succeeded', release: 'foo/tags/1.4.0', ref: 'foo/channels/stable', fetch: {input: {node: 'web1', status: 'updated'}}})
  // The next tick reads its own document, named as such: the index's version is not the document's (a time in milliseconds).
  const tick = await node.apply()
  t.is(tick.exitCode, 0, tick.stderr)
  const document = (await nodeDocument(repo, 'web1')).json
  const {id, fetch} = JSON.parse(tick.stdout)
  t.deepEqual(fetch.nodeDocument, {version: document.version, expires: document.expires})
  t.false('indexVersion' in fetch)
  t.false('indexExpires' in fetch)
  t.deepEqual(JSON.parse(await readFile(join(runDir(node.state, id), 'run.json'), 'utf8')).fetch.nodeDocument, fetch.nodeDocument)
  t.is(await readFile(node.input, 'utf8'), inputFor('foo/channels/stable', 8080))

  // A new input is published; then someone changes one byte of it on the server.
  await node.publish(inputFor('foo/channels/stable', 9090))
  const index = JSON.parse(await readFile(join(repo, 'index.json'), 'utf8'))
  const file = join(repo, index.nodes.web1.input)
  const bytes = await readFile(file)
  bytes[bytes.indexOf('9090')] = '8'.charCodeAt(0)
  await writeFile(file, bytes)

  await assertRefused(t, node, /input of node web1 does not match the signed index/, {
    input: inputFor('foo/channels/stable', 8080),
    modules: (await readdir(node.modules)).sort(),
    lastCompleted: id,
  })
})

test('issue 35: an expired index gives a node with input_from: repository nothing new (not its newly published input), but the node keeps enforcing the input it kept and its installed release', async (t) => {
  const node = await publishedWeb1(t, 'web1', {channel: 'stable', metrics: true})
  const good = await node.apply()
  t.is(good.exitCode, 0, good.stderr)
  // A new input is published, then the index lapses (the re-signing timer broke): it is re-signed here as it was, expired.
  await node.publish(inputFor('foo/channels/stable', 9090))
  const index = JSON.parse(await readFile(join(node.repo, 'index.json'), 'utf8'))
  const bytes = Buffer.from(JSON.stringify({...index, version: index.version + 1, expires: '2026-01-01T00:00:00.000Z'}))
  await writeFile(join(node.repo, 'index.json.sig'), signIndex(bytes, await loadSigningKey(node.key)))
  await writeFile(join(node.repo, 'index.json'), bytes)
  // And web1's own document (what it reads once it accepted one), lapsed the same way.
  const document = await nodeDocument(node.repo, 'web1')
  await writeNodeDocument(node.repo, 'web1', {json: {...document.json, version: document.json.version + 1, expires: '2026-01-01T00:00:00.000Z'}}, node.key)
  await rm(join(node.fake, 'args'), {force: true})
  const expired = await node.apply()
  t.is(expired.exitCode, 0, expired.stderr)
  t.regex(expired.stderr, /warning: --fetch: node web1's document version \d+ of .* expired at 2026-01-01T00:00:00\.000Z: .*: nothing new is taken from it; applying foo\/tags\/1\.4\.0 as installed here \(verified\)/)
  // The document that lapsed is named as such, as a fetch that read one is: indexExpires would say the index's.
  const record = JSON.parse(expired.stdout)
  t.like(record, {state: 'succeeded', release: 'foo/tags/1.4.0', fetch: {fallback: true, nodeDocument: {version: document.json.version + 1, expires: '2026-01-01T00:00:00.000Z'}}})
  t.false('indexExpires' in record.fetch, JSON.stringify(record.fetch))
  t.is(await readFile(node.input, 'utf8'), inputFor('foo/channels/stable', 8080), 'the new input was not taken')
  t.true(await exists(join(node.fake, 'args')), 'puppet enforced what the node has')
  t.regex(await readFile(node.metrics, 'utf8'), new RegExp(`^localpuppet_index_expiry_timestamp_seconds ${Date.parse('2026-01-01T00:00:00.000Z') / 1000}$`, 'm'))
})

test('publishing the same input again repairs a stored input that was changed or removed (the index entry kept): the refused node takes it on its next run', async (t) => {
  const dir = await tempDir(t)
  const {key, pub} = await keyPair(dir, 'release')
  const {repo} = await demoRepository(join(dir, 'build'), key)
  const web1 = join(dir, 'web1.yaml')
  await writeFile(web1, inputFor('foo/tags/1.4.0', 8080))
  const publish = () => cli(['publish', '--node', 'web1', '--input', web1, '--repo', repo, '--sign', key])
  t.is((await publish()).exitCode, 0)
  const entry = JSON.parse(await readFile(join(repo, 'index.json'), 'utf8')).nodes.web1
  const stored = join(repo, entry.input)
  const bytes = await readFile(stored)
  bytes[bytes.indexOf('8080')] = '9'.charCodeAt(0)
  await writeFile(stored, bytes)
  const node = await makeNode(dir, 'web1', {repo, trust: pub})
  const refused = await node.apply()
  t.is(refused.exitCode, 65, refused.stderr)
  t.regex(JSON.parse(refused.stdout).error.suggestions[0], /publishing the same input again repairs it \(localpuppet publish --node web1 --input FILE --repo DIR\)/)

  const repaired = await publish()
  t.is(repaired.exitCode, 0, repaired.stderr)
  t.is(repaired.stdout.split('\n')[0], `repaired input of node web1 (app foo/tags/1.4.0): the repository's ${entry.input} was missing or not what the index lists; written again`)
  t.is(await readFile(stored, 'utf8'), inputFor('foo/tags/1.4.0', 8080))
  t.deepEqual(JSON.parse(await readFile(join(repo, 'index.json'), 'utf8')).nodes.web1, entry, 'the index entry is kept')
  const applied = await node.apply()
  t.is(applied.exitCode, 0, applied.stderr)
  t.is(await readFile(node.input, 'utf8'), inputFor('foo/tags/1.4.0', 8080))

  await rm(stored)
  const missing = await publish()
  t.regex(missing.stdout, /^repaired input of node web1 /)
  t.is(await readFile(stored, 'utf8'), inputFor('foo/tags/1.4.0', 8080))
  t.regex((await publish()).stdout, /^unchanged input of node web1 /)
})

test("an index entry pointing node A at node B's input is refused by the index parser (65), even unsigned with no keys trusted", async (t) => {
  const dir = await tempDir(t)
  const {key, pub} = await keyPair(dir, 'release')
  const {repo, archives} = await demoRepository(join(dir, 'build'), key)
  // The same releases in an unsigned repository.
  const unsigned = join(dir, 'unsigned')
  t.is((await cli(['publish', ...archives, '--repo', unsigned])).exitCode, 0)
  const inputs = join(dir, 'inputs')
  await mkdir(inputs)
  await writeFile(join(inputs, 'web1.yaml'), inputFor('foo/tags/1.4.0', 8080))
  await writeFile(join(inputs, 'db1.yaml'), inputFor('foo/tags/1.3.0', 5432))
  const published = await cli(['publish', '--inputs', inputs, '--repo', unsigned])
  t.is(published.exitCode, 0, published.stderr)

  // Edited by hand (no signature to break): db1's entry names web1's file, hash and all.
  const indexFile = join(unsigned, 'index.json')
  const index = JSON.parse(await readFile(indexFile, 'utf8'))
  index.nodes.db1 = {...index.nodes.web1}
  await writeFile(indexFile, JSON.stringify(index, null, 1))

  const node = await makeNode(dir, 'db1', {repo: unsigned})
  await assertRefused(t, node, /node "db1": input path "inputs\/web1\/[0-9a-f]{64}\.yaml" is not inputs\/db1\/[0-9a-f]{64}\.yaml/, {input: null, modules: [], lastCompleted: null})

  // The signed repository unsigned (its signature removed) while the node trusts the key: refused too.
  await rm(join(repo, 'index.json.sig'))
  const trusting = await makeNode(join(dir, 'trusting'), 'web1', {repo, trust: pub})
  await assertRefused(t, trusting, /index\.json: not signed, and trusted keys are configured/, {input: null, modules: [], lastCompleted: null})
})

test('a replayed older index, naming an older input for web1, is refused (65): the newer input kept, nothing applied, the attempt recorded as refused', async (t) => {
  const node = await publishedWeb1(t, 'web1')
  // The attacker keeps the index (and signature) that names the input with port 8080.
  const old = {index: await readFile(join(node.repo, 'index.json')), sig: await readFile(join(node.repo, 'index.json.sig')), document: await nodeDocument(node.repo, 'web1')}
  const first = await node.apply()
  t.is(first.exitCode, 0, first.stderr)
  await node.publish(inputFor('foo/tags/1.4.0', 9090))
  const second = await node.apply()
  t.is(second.exitCode, 0, second.stderr)
  t.like(JSON.parse(second.stdout), {state: 'succeeded', fetch: {input: {node: 'web1', status: 'updated'}}})
  t.is(await readFile(node.input, 'utf8'), inputFor('foo/tags/1.4.0', 9090))

  // The old index and signature served again (the old input file is still in the repository, stored by content).
  await writeFile(join(node.repo, 'index.json.sig'), old.sig)
  await writeFile(join(node.repo, 'index.json'), old.index)
  // And web1's own document of then (what it reads once it accepted one).
  await writeNodeDocument(node.repo, 'web1', old.document)
  t.true(await exists(join(node.repo, JSON.parse(old.index.toString()).nodes.web1.input)), 'the old input is there to be served')
  await assertRefused(t, node, /^node web1's document version \d+ of .* is older than version \d+ already accepted from it: a replay \(rollback attack\)\?$/, {
    input: inputFor('foo/tags/1.4.0', 9090),
    modules: (await readdir(node.modules)).sort(),
    lastCompleted: JSON.parse(second.stdout).id,
  })
})

test('a node with no input in the repository: 66, naming the configuration file to set node_name in, never another node (issue 35: "did you mean web1?" would hand it web1\'s input)', async (t) => {
  const node = await publishedWeb1(t, 'web2')
  const result = await cli(['apply', '--fetch'], {env: {LOCALPUPPET_CONFIG: node.config}})
  t.is(result.exitCode, 66, result.stderr)
  t.regex(result.stderr, /^localpuppet: node web2 has no input in the repository \S+$/m)
  t.notRegex(result.stderr, /web1/)
  t.true(result.stderr.includes(`or set node_name in ${node.config}`), result.stderr)
  t.false(await exists(node.input))
})

test("a refused attempt still records the channel the node follows (its fetched input's, else the input it kept), so the metrics and promote's gate count it", async (t) => {
  const node = await publishedWeb1(t, 'web1', {channel: 'canary', metrics: true})
  const {repo, metrics} = node
  const desired = /^localpuppet_desired_release_info\{node="web1",app="foo",ref="foo\/channels\/canary",channel="canary",release="([^"]*)",input="repository"\} 1$/m

  // Its first attempt: the input verifies, but the archive canary's tag comes in was changed on the server (65).
  const archive = join(repo, JSON.parse(await readFile(join(repo, 'index.json'), 'utf8')).apps.foo.tags['1.4.0'].archive)
  const original = await readFile(archive)
  await writeFile(archive, Buffer.concat([original, Buffer.from('x')]))
  const first = await node.apply()
  t.is(first.exitCode, 65, first.stdout)
  t.like((await statusJson(node.state)).record, {state: 'refused', ref: 'foo/channels/canary', release: null})
  t.regex(await readFile(metrics, 'utf8'), desired)
  t.regex(await readFile(metrics, 'utf8'), /^localpuppet_last_attempt_exit_code\{state="refused",release=""\} 65$/m)

  // The archive put back: it runs, and keeps the input.
  await writeFile(archive, original)
  t.is((await node.apply()).exitCode, 0)

  // Its records gone (a new state dir), and its published input tampered with: the input it kept says what it follows.
  await rm(node.state, {recursive: true})
  await node.publish(inputFor('foo/channels/canary', 9090))
  const file = join(repo, JSON.parse(await readFile(join(repo, 'index.json'), 'utf8')).nodes.web1.input)
  await writeFile(file, (await readFile(file, 'utf8')).replace('9090', '8090'))
  const refused = await node.apply()
  t.is(refused.exitCode, 65, refused.stdout)
  t.like((await statusJson(node.state)).record, {state: 'refused', ref: 'foo/channels/canary', release: null})
  t.is(desired.exec(await readFile(metrics, 'utf8'))?.[1], '')
})

test('apply --fetch --save on a node whose input comes from the repository is refused (64): the next fetch would undo it', async (t) => {
  const node = await publishedWeb1(t, 'web1')
  t.is((await node.apply()).exitCode, 0)
  const kept = await readFile(node.input, 'utf8')
  const history = await readdir(node.state)
  const saved = await cli(['apply', '--fetch', '--save', '--app', 'foo/tags/1.3.0'], {env: {LOCALPUPPET_CONFIG: node.config, FAKE_PUPPET_DIR: node.fake, FAKE_PUPPET_SLEEP: '0'}})
  t.is(saved.exitCode, 64, saved.stderr)
  t.regex(saved.stderr.split('\n')[0], /^localpuppet: --fetch --save: this node's input comes from the repository \(input_from: repository\)/)
  t.regex(saved.stderr, /localpuppet publish --node web1 --input FILE --repo DIR/)
  t.is(await readFile(node.input, 'utf8'), kept, 'the kept input is unchanged')
  t.deepEqual(await readdir(node.state), history, 'nothing recorded: a usage error')
})

test('validate resolves an input on a channel through --repo, or through the channels this node last read', async (t) => {
  const dir = await tempDir(t)
  const {key} = await keyPair(dir, 'release')
  const {repo} = await demoRepository(join(dir, 'build'), key)
  t.is((await cli(['promote', 'foo/tags/1.3.0', '--channel', 'stable', '--repo', repo, '--sign', key])).exitCode, 0)
  await writeFile(join(dir, 'web1.yaml'), 'app: foo/channels/stable\nclasses: [foo]\n')
  // The demo's module dir, which never read a repository.
  const unknown = await cli(['validate', join(dir, 'web1.yaml'), '--module-dir', DEMO_MODULES, '--puppet', 'none'])
  t.is(unknown.exitCode, 65)
  t.regex(unknown.stdout, /this node has not read channel stable of foo/)
  const viaRepo = await cli(['validate', join(dir, 'web1.yaml'), '--module-dir', DEMO_MODULES, '--puppet', 'none', '--repo', repo, '--json'])
  t.is(viaRepo.exitCode, 0, viaRepo.stdout)
  t.regex(viaRepo.stdout, /foo\/tags\/1\.3\.0/)
  // Any fetch from the repository makes a node know its channels.
  const modules = join(dir, 'modules')
  await mkdir(modules)
  t.is((await cli(['fetch', 'foo/channels/stable', '--source', repo, '--module-dir', modules, '--allow-untrusted'])).exitCode, 0)
  const remembered = await cli(['validate', join(dir, 'web1.yaml'), '--module-dir', modules, '--puppet', 'none', '--json'])
  t.is(remembered.exitCode, 0, remembered.stdout)
})

const asRoot = process.getuid?.() === 0 ? test : test.skip

asRoot("an input directory another user owns is refused (77) before anything is fetched, and the input is not written", async (t) => {
  const node = await publishedWeb1(t, 'web1')
  await chown(dirname(node.input), 1000, 1000)
  const result = await node.apply()
  t.is(result.exitCode, 77, result.stdout)
  t.regex(JSON.parse(result.stdout).error.message, new RegExp(`input directory ${dirname(node.input)} is not trusted: owned by uid 1000`))
  t.false(await exists(node.input))
  t.deepEqual(await readdir(node.modules), [], 'nothing fetched')
  t.false(await exists(join(node.fake, 'args')), 'puppet was not started')
})

asRoot('an input directory on a full disk: 74 naming the input file, no temporary file left, puppet not started', async (t) => {
  const node = await publishedWeb1(t, 'web1')
  // The input's directory is a small file system, full.
  const {mount, fill} = await smallFileSystem(t)
  await fill()
  const config = (await readFile(node.config, 'utf8')).replace(`input: ${JSON.stringify(node.input)}`, `input: ${JSON.stringify(join(mount, 'input.yaml'))}`)
  await writeFile(node.config, config)
  const result = await node.apply()
  t.is(result.exitCode, 74, result.stdout)
  t.regex(JSON.parse(result.stdout).error.message, /input\.yaml/)
  t.deepEqual((await readdir(mount)).sort(), ['filler'], 'no input and no temporary file')
  t.false(await exists(join(node.fake, 'args')), 'puppet was not started')
})

test('a node input that is not UTF-8 is refused at publish (65, naming it, --node and --inputs alike) and, put straight into a signed repository, on the node (65): the kept input unchanged, nothing applied', async (t) => {
  const dir = await tempDir(t)
  const {key, pub} = await keyPair(dir, 'release')
  const {repo} = await demoRepository(join(dir, 'build'), key)
  const web1 = join(dir, 'web1.yaml')
  await writeFile(web1, inputFor('foo/tags/1.4.0', 8080))
  t.is((await cli(['publish', '--node', 'web1', '--input', web1, '--repo', repo, '--sign', key])).exitCode, 0)
  const node = await makeNode(dir, 'web1', {repo, trust: pub})
  const first = await node.apply()
  t.is(first.exitCode, 0, first.stderr)

  // Latin-1: "café" with é as the one byte 0xe9.
  const latin1 = Buffer.concat([Buffer.from(inputFor('foo/tags/1.4.0', 9090) + 'parameters:\n  motd: "caf'), Buffer.from([0xe9]), Buffer.from('"\n')])
  const inputs = join(dir, 'inputs')
  await mkdir(inputs)
  await writeFile(join(inputs, 'web1.yaml'), latin1)
  const indexBefore = await readFile(join(repo, 'index.json'), 'utf8')
  for (const args of [['--node', 'web1', '--input', join(inputs, 'web1.yaml')], ['--inputs', inputs]]) {
    const refused = await cli(['publish', ...args, '--repo', repo, '--sign', key])
    t.is(refused.exitCode, 65, refused.stderr)
    t.is(refused.stderr.split('\n')[0], `localpuppet: ${join(inputs, 'web1.yaml')}:6: invalid UTF-8 (byte 0xe9 at offset 75); the file must be UTF-8 text`)
    t.is(await readFile(join(repo, 'index.json'), 'utf8'), indexBefore, 'nothing published')
  }

  // Written into the repository by hand and the index re-signed: the signature holds, the bytes are still not UTF-8.
  const sha256 = createHash('sha256').update(latin1).digest('hex')
  const path = `inputs/web1/${sha256}.yaml`
  await writeFile(join(repo, path), latin1)
  const index = JSON.parse(indexBefore)
  index.nodes.web1 = {...index.nodes.web1, input: path, size: latin1.length, sha256}
  await writeFile(join(repo, 'index.json'), JSON.stringify(index, null, 1))
  t.is((await cli(['publish', '--repo', repo, '--sign', key])).exitCode, 0)
  await assertRefused(t, node, new RegExp(`^input of node web1: ${join(repo, path)}:6: invalid UTF-8 \\(byte 0xe9 at offset 75\\); the file must be UTF-8 text; refused, the input kept as it was$`), {
    input: inputFor('foo/tags/1.4.0', 8080),
    modules: (await readdir(node.modules)).sort(),
    lastCompleted: JSON.parse(first.stdout).id,
  })
  const again = await node.apply()
  t.regex(JSON.parse(again.stdout).error.suggestions[0], /^the publisher saves it as UTF-8 and publishes it again: localpuppet publish --node web1 --input FILE --repo DIR/)
})

test('an input with a byte order mark is kept byte for byte (the next run finds it unchanged); a NUL byte is refused at publish (65)', async (t) => {
  const dir = await tempDir(t)
  const {key, pub} = await keyPair(dir, 'release')
  const {repo} = await demoRepository(join(dir, 'build'), key)
  const web1 = join(dir, 'web1.yaml')
  const withBom = Buffer.from('\uFEFF' + inputFor('foo/tags/1.4.0', 8080))
  await writeFile(web1, withBom)
  t.is((await cli(['publish', '--node', 'web1', '--input', web1, '--repo', repo, '--sign', key])).exitCode, 0)
  const node = await makeNode(dir, 'web1', {repo, trust: pub})
  const first = await node.apply()
  t.is(first.exitCode, 0, first.stderr)
  t.deepEqual(await readFile(node.input), withBom)
  const second = await node.apply()
  t.like(JSON.parse(second.stdout), {state: 'succeeded', fetch: {input: {node: 'web1', status: 'unchanged'}}})

  await writeFile(web1, inputFor('foo/tags/1.4.0', 8080) + 'parameters:\n  motd: "a\0b"\n')
  const nul = await cli(['publish', '--node', 'web1', '--input', web1, '--repo', repo, '--sign', key])
  t.is(nul.exitCode, 65, nul.stderr)
  t.regex(nul.stderr, new RegExp(`^localpuppet: ${web1}:\\S*: null byte is not allowed in input`))
})

test('publish --inputs DIR publishes only regular files: a link (to a secret outside DIR, or to a file inside it) or a FIFO is refused (65) naming the entry, nothing published, nothing of the target shown', async (t) => {
  const dir = await tempDir(t)
  const {key} = await keyPair(dir, 'release')
  const {repo} = await demoRepository(join(dir, 'build'), key)
  const secret = join(dir, 'shadow')
  const SECRET = 'root:$6$s3cr3tSALT$verysecrethashverysecrethash:19000:0:99999:7:::'
  await writeFile(secret, SECRET + '\n', {mode: 0o600})
  const inputs = join(dir, 'inputs')
  await mkdir(inputs)
  await writeFile(join(inputs, 'db1.yaml'), inputFor('foo/tags/1.4.0', 5432))
  const indexBefore = await readFile(join(repo, 'index.json'), 'utf8')
  const publish = () => cli(['publish', '--inputs', inputs, '--repo', repo, '--sign', key])
  const {symlink} = await import('node:fs/promises')
  const {execFileSync} = await import('node:child_process')
  const cases: Array<[string, () => Promise<void>, string]> = [
    ['web1.yaml', () => symlink(secret, join(inputs, 'web1.yaml')), 'is a symbolic link'],
    ['web2.yaml', () => symlink('db1.yaml', join(inputs, 'web2.yaml')), 'is a symbolic link'],
    ['web3.yaml', async () => void execFileSync('mkfifo', [join(inputs, 'web3.yaml')]), 'is a FIFO (named pipe)'],
  ]
  for (const [entry, make, kind] of cases) {
    await make()
    for (const json of [false, true]) {
      const refused = await cli(['publish', '--inputs', inputs, '--repo', repo, '--sign', key, ...(json ? ['--json'] : [])])
      t.is(refused.exitCode, 65, refused.stderr)
      const message = json ? JSON.parse(refused.stdout).error.message : refused.stderr.split('\n')[0]
      t.is(message, `${json ? '' : 'localpuppet: '}--inputs ${inputs}: ${entry} ${kind}, not a regular file; only regular files are published (nothing published)`)
      t.false((refused.stdout + refused.stderr).includes('s3cr3t'), 'nothing of the target is shown')
    }
    t.is(await readFile(join(repo, 'index.json'), 'utf8'), indexBefore, 'nothing published')
    await rm(join(inputs, entry))
  }

  const published = await publish()
  t.is(published.exitCode, 0, published.stderr)
  t.deepEqual(Object.keys(JSON.parse(await readFile(join(repo, 'index.json'), 'utf8')).nodes), ['db1'])
})

test("a node whose repository_id is not the source's refuses the index on first contact (65): no input kept, nothing applied; with the genuine id it runs", async (t) => {
  const node = await publishedWeb1(t, 'web1')
  const genuine = JSON.parse(await readFile(join(node.repo, 'index.json'), 'utf8')).repository
  const config = await readFile(node.config, 'utf8')
  await writeFile(node.config, `${config}repository_id: "${'0'.repeat(32)}"\n`)
  await assertRefused(t, node, new RegExp(`^index of ${node.repo} is of repository ${genuine}, not ${'0'.repeat(32)} as repository_id in ${node.config}:\\d+ says; refused`), {input: null, modules: ['.localpuppet'], lastCompleted: null})
  await writeFile(node.config, `${config}repository_id: "${genuine}"\n`)
  const applied = await node.apply()
  t.is(applied.exitCode, 0, applied.stderr)
  t.is(await readFile(node.input, 'utf8'), inputFor('foo/tags/1.4.0', 8080))
})
