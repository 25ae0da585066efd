import {execFileSync} from 'node:child_process'
import {createHash, randomBytes} from 'node:crypto'
import {mkdir, readFile, readdir, rm, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import test from 'ava'

import {cli, isolatePuppet, statusJson, type CliResult} from '../helpers/cli.js'
import {keyPair} from '../helpers/repository.js'
import {tempDir, writeTree} from '../helpers/temp.js'

// Issue 37, with real Puppet (Debian 12's 7.23 on the host, Debian 13's 8.10 in
// bin/debian13's chroot): a pull node applies an input encrypted to it whose secret a
// module takes as Sensitive; then the secret is searched for, as it is and in base64, in
// everything the node, Puppet and the tools wrote or printed: found nowhere.

/** Every file under `dir` whose bytes hold any of `needles`. */
async function filesHolding(dir: string, needles: Buffer[]): Promise<string[]> {
  const found: string[] = []
  for (const entry of await readdir(dir, {withFileTypes: true, recursive: true})) {
    if (!entry.isFile()) continue
    const path = join(entry.parentPath, entry.name)
    const bytes = await readFile(path)
    if (needles.some((needle) => bytes.includes(needle))) found.push(path)
  }

  return found
}

test('a secret typed Sensitive reaches the module as Sensitive from an encrypted input, and is nowhere in plain text or base64 afterwards; another node cannot read it', async (t) => {
  const dir = await tempDir(t)
  const secret = `s3cret-${randomBytes(12).toString('hex')}`
  const digest = createHash('sha256').update(secret).digest('hex')
  const {key, pub} = await keyPair(dir, 'release')
  // The module proves it got the value itself (by its sha256, given in clear) and that it is Sensitive.
  await writeTree(join(dir, 'build'), {
    'db/tags/1.0.0/db/manifests/init.pp': [
      'class db(Sensitive[String] $password, String $password_sha256, Integer $port) {',
      "  if sha256($password.unwrap) != $password_sha256 { fail('db: the password is not the one published') }",
      "  notify { 'password': message => $password }",
      '  notify { "db: port ${port}, password ${type($password, \'generalized\')}": }',
      '}',
      '',
    ].join('\n'),
  })
  const outputs: CliResult[] = []
  const run = async (args: string[], env: Record<string, string> = {}) => {
    const result = await cli(args, {env})
    outputs.push(result)
    return result
  }

  const archive = join(dir, 'db-1.0.0.tar.gz')
  t.is((await run(['pack', 'db/tags/1.0.0', '--module-dir', join(dir, 'build'), '-o', archive, '--sign', key])).exitCode, 0)
  const repo = join(dir, 'repo')

  const makeNode = async (home: string, name: string) => {
    const config = join(home, 'config.yaml')
    await mkdir(join(home, 'etc'), {recursive: true})
    await mkdir(join(home, 'state'), {recursive: true})
    await mkdir(join(home, 'modules'), {recursive: true})
    const settings = {module_dir: join(home, 'modules'), state_dir: join(home, 'state'), source: repo, trust: pub, input: join(home, 'etc', 'input.yaml'), input_from: 'repository', node_name: name}
    await writeFile(config, Object.entries(settings).map(([k, v]) => `${k}: ${JSON.stringify(v)}\n`).join(''))
    const env = {LOCALPUPPET_CONFIG: config}
    const made = await run(['node-key'], env)
    t.is(made.exitCode, 0, made.stderr)
    return {home, env, state: join(home, 'state'), modules: join(home, 'modules'), recipient: made.stdout.trim()}
  }

  const web1 = await makeNode(join(dir, 'web1'), 'web1')
  // CI's checkout: the input in clear, with the node's recipient beside it; gone once published.
  const ci = join(dir, 'ci')
  await writeTree(ci, {
    'web1.yaml': `app: db/tags/1.0.0\nclasses:\n  db:\n    port: 5432\n    password_sha256: ${digest}\n    password: !secret ${secret}\n`,
    'web1.pub': `${web1.recipient}\n`,
  })
  const published = await run(['publish', archive, '--inputs', ci, '--repo', repo, '--sign', key])
  t.is(published.exitCode, 0, published.stderr)
  const entry = JSON.parse(await readFile(join(repo, 'index.json'), 'utf8')).nodes.web1
  // Standard age: age itself reads it with the node's key.
  t.is(execFileSync('age', ['--decrypt', '-i', join(web1.state, 'keys', 'node.key'), join(repo, entry.input)], {encoding: 'utf8'}), await readFile(join(ci, 'web1.yaml'), 'utf8'))
  // CI's check compiles it as a run would: the secret given to the class as Sensitive.
  const validated = await run(['validate', join(ci, 'web1.yaml'), '--module-dir', join(dir, 'build'), '--compile', '--', ...isolatePuppet(dir)])
  t.is(validated.exitCode, 0, validated.stdout)
  t.regex(validated.stdout, /^ok +.*web1\.yaml \(db\/tags\/1\.0\.0, compiled: \d+ resources\)$/m)
  const needles = [Buffer.from(secret), Buffer.from(Buffer.from(secret).toString('base64').replace(/=+$/, ''))]
  t.deepEqual(await filesHolding(dir, needles), [join(ci, 'web1.yaml')], 'the search finds the one file that holds it')
  await rm(ci, {recursive: true})

  const puppet = isolatePuppet(dir)
  // --debug: Puppet explains each automatic parameter lookup with the value it found (in puppet.log too).
  const applied = await run(['apply', '--fetch', '--', ...puppet, '--show_diff', '--debug'], web1.env)
  t.is(applied.exitCode, 0, applied.stderr)
  t.regex(applied.stdout + applied.stderr, /db: port 5432, password Sensitive\[String\]/)
  t.regex(applied.stdout + applied.stderr, /Sensitive \[value redacted\]/)
  const {record} = await statusJson(web1.state)
  outputs.push({exitCode: 0, stdout: JSON.stringify(record), stderr: ''})
  t.like(record, {state: 'succeeded', release: 'db/tags/1.0.0'})
  // Keyed by the node's key: not the value's sha256, so whoever reads run.json cannot test a guess offline.
  const shownDigest = record.input.document.classes.db.password.localpuppet_secret
  t.regex(shownDigest, /^hmac-sha256:[0-9a-f]{16}$/)
  t.false(shownDigest.includes(digest.slice(0, 16)))
  // The same digest run after run (what --if-changed compares): the next run is skipped.
  const skipped = await run(['apply', '--fetch', '--if-changed', '--', ...puppet, '--show_diff', '--debug'], web1.env)
  t.is(skipped.exitCode, 0, skipped.stderr)
  t.is((await statusJson(web1.state)).record.state, 'skipped')

  // Again from what the node kept (the ciphertext), by --replay, and as plan shows it.
  const replayed = await run(['apply', '--replay', record.id, '--json', '--', ...puppet], web1.env)
  t.is(replayed.exitCode, 0, replayed.stderr)
  const planned = await run(['plan'], web1.env)
  t.is(planned.exitCode, 0, planned.stderr)
  t.true(planned.stdout.includes(`\n  db::password: [secret ${shownDigest}]`), planned.stdout)
  t.is((await run(['plan', '--json'], web1.env)).exitCode, 0)
  t.is((await run(['history', '--json'], web1.env)).exitCode, 0)
  t.is((await run(['log'], web1.env)).exitCode, 0)

  // Another node claiming web1's name fetches web1's ciphertext: its own key cannot open it (65), nothing applied.
  const thief = await makeNode(join(dir, 'thief'), 'web1')
  const stolen = await run(['apply', '--fetch', '--', ...puppet], thief.env)
  t.is(stolen.exitCode, 65, stolen.stderr)
  t.regex(stolen.stderr, /encrypted input not encrypted to this node's key/)

  t.deepEqual(await filesHolding(dir, needles), [], 'no file of the node, Puppet (vardir, reports), the repository or the test holds it')
  for (const output of outputs) for (const needle of needles) t.false(output.stdout.includes(needle.toString()) || output.stderr.includes(needle.toString()), 'no command printed it')
})
