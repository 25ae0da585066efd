import {mkdir, readFile, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import test, {type ExecutionContext} from 'ava'

import {cli} from '../helpers/cli.js'
import {exists, tempDir, writeTree} from '../helpers/temp.js'
import {nodeDocument} from '../helpers/node-documents.js'
import {keyPair} from '../helpers/repository.js'

/** A repository with app web 1.0.0 published: class nc4site(greeting = 'hello', port), and class motd using a variable nobody sets. */
async function repository(t: ExecutionContext, manifest = ''): Promise<{dir: string; repo: string; nodes: string}> {
  const dir = await tempDir(t)
  const modules = join(dir, 'modules')
  await writeTree(modules, {
    'web/tags/1.0.0/nc4site/manifests/init.pp': "class nc4site (\n  String $greeting = 'hello',\n  Integer $port,\n) {\n  notify { \"${greeting} on ${port}\": }\n}\n",
    'web/tags/1.0.0/motd/manifests/init.pp': 'class motd {\n  notify { "motd: ${motd_text}": }\n}\n',
    ...(manifest ? {'web/tags/1.0.0/manifest.yaml': manifest} : {}),
  })
  const archive = join(dir, 'web-1.0.0.tar.gz')
  const packed = await cli(['pack', 'web/tags/1.0.0', '--module-dir', modules, '-o', archive])
  t.is(packed.exitCode, 0, packed.stderr)
  const repo = join(dir, 'repo')
  const published = await cli(['publish', archive, '--repo', repo])
  t.is(published.exitCode, 0, published.stderr)
  const nodes = join(dir, 'nodes')
  await mkdir(nodes)
  return {dir, repo, nodes}
}

const GOOD = 'app: web/tags/1.0.0\nclasses:\n  nc4site:\n    port: 80\n'

test('publish --inputs: every problem of every input on a line of its own (file:line, the key, did you mean), 65, and nothing published; --json lists them', async (t) => {
  const {repo, nodes} = await repository(t)
  await writeFile(join(nodes, 'web1.yaml'), GOOD)
  await writeFile(join(nodes, 'web2.yaml'), 'app: web/tags/1.0.0\nclasses:\n  nc4sit:\n    port: 80\n')
  await writeFile(join(nodes, 'web3.yaml'), 'app: web/tags/1.0.0\nclasses:\n  nc4site:\n    greting: hi\n')
  const before = await readFile(join(repo, 'index.json'), 'utf8')
  const result = await cli(['publish', '--inputs', nodes, '--repo', repo, '--puppet', 'none'])
  t.is(result.exitCode, 65, result.stderr)
  t.is(result.stdout, '')
  t.deepEqual(result.stderr.trimEnd().split('\n'), [
    `localpuppet: ${nodes}/web2.yaml:3: class nc4sit is not defined on the modulepath (Puppet looks in nc4sit/manifests/init.pp); did you mean nc4site?`,
    `localpuppet: ${nodes}/web3.yaml:4: class nc4site has no parameter greting (did you mean greeting?); it declares greeting, port (web/tags/1.0.0/nc4site/manifests/init.pp:1)`,
    `localpuppet: ${nodes}/web3.yaml:3: Class[Nc4site]: expects a value for parameter 'port' (web/tags/1.0.0/nc4site/manifests/init.pp:1)`,
    'localpuppet: 2 of 3 node inputs refused (3 problems: what the node would refuse or Puppet would fail on); nothing published',
    '  hint: fix the inputs listed and publish again; localpuppet validate --repo DIR lists the same against installed releases',
  ])
  t.is(await readFile(join(repo, 'index.json'), 'utf8'), before)
  t.false(await exists(join(repo, 'inputs')))

  const json = await cli(['publish', '--inputs', nodes, '--repo', repo, '--puppet', 'none', '--json'])
  t.is(json.exitCode, 65)
  const {error} = JSON.parse(json.stdout)
  t.deepEqual(
    error.problems.map((p: {node: string; file: string; line: number}) => [p.node, p.file, p.line]),
    [
      ['web2', join(nodes, 'web2.yaml'), 3],
      ['web3', join(nodes, 'web3.yaml'), 4],
      ['web3', join(nodes, 'web3.yaml'), 3],
    ],
  )
})

test("publish judges an input as validate does with Puppet: a variable nobody sets is refused under the release's strict_variables, and published when the release turns it off", async (t) => {
  const strict = await repository(t)
  await writeFile(join(strict.nodes, 'web1.yaml'), 'app: web/tags/1.0.0\nclasses: [motd]\n')
  await writeFile(join(strict.nodes, 'web2.yaml'), 'app: web/tags/1.0.0\nclasses: [motd]\n')
  const refused = await cli(['publish', '--inputs', strict.nodes, '--repo', strict.repo])
  t.is(refused.exitCode, 65, refused.stderr)
  // The release's problem, said once for the inputs it refuses, the first input named.
  t.regex(refused.stderr, new RegExp(`^localpuppet: ${strict.nodes}/web1\\.yaml \\(and 1 other input\\): web/tags/1\\.0\\.0/motd/manifests/init\\.pp:2:21: Unknown variable: 'motd_text' in class motd: .*\\nlocalpuppet: 2 of 2 node inputs refused \\(1 problem:`, 'm'))

  const lax = await repository(t, 'strict: warning\nstrict_variables: false\n')
  await writeFile(join(lax.nodes, 'web1.yaml'), 'app: web/tags/1.0.0\nclasses: [motd]\n')
  const published = await cli(['publish', '--inputs', lax.nodes, '--repo', lax.repo])
  t.is(published.exitCode, 0, published.stderr)
  t.regex(published.stdout, /^published input of node web1 \(app web\/tags\/1\.0\.0\)$/m)
})

test('publish --inputs DIR --prune says which nodes it pruned (--json lists them); without --prune nothing is removed', async (t) => {
  const {repo, nodes} = await repository(t)
  for (const node of ['web1', 'web2', 'web3']) await writeFile(join(nodes, `${node}.yaml`), GOOD)
  t.is((await cli(['publish', '--inputs', nodes, '--repo', repo, '--puppet', 'none'])).exitCode, 0)
  const fewer = join(nodes, '..', 'fewer')
  await mkdir(fewer)
  await writeFile(join(fewer, 'web1.yaml'), GOOD)
  const kept = await cli(['publish', '--inputs', fewer, '--repo', repo, '--puppet', 'none'])
  t.is(kept.exitCode, 0, kept.stderr)
  t.notRegex(kept.stdout, /pruned/)
  const pruned = await cli(['publish', '--inputs', fewer, '--repo', repo, '--puppet', 'none', '--prune'])
  t.is(pruned.exitCode, 0, pruned.stderr)
  t.regex(pruned.stdout, new RegExp(`^pruned input of node web2 \\(not in ${fewer}\\)\\npruned input of node web3 \\(not in ${fewer}\\)$`, 'm'))
  t.deepEqual(Object.keys(JSON.parse(await readFile(join(repo, 'index.json'), 'utf8')).nodes), ['web1'])
  t.false(await exists(join(repo, 'inputs', 'web2')))

  await writeFile(join(nodes, 'web4.yaml'), GOOD)
  const json = await cli(['publish', '--inputs', nodes, '--repo', repo, '--puppet', 'none', '--prune', '--json'])
  t.is(json.exitCode, 0, json.stderr)
  t.deepEqual(JSON.parse(json.stdout).pruned, [])
  const other = join(nodes, '..', 'other')
  await mkdir(other)
  await writeFile(join(other, 'db1.yaml'), GOOD)
  const everything = await cli(['publish', '--inputs', other, '--repo', repo, '--puppet', 'none', '--prune'])
  t.is(everything.exitCode, 64, everything.stderr)
  t.regex(everything.stderr, /--prune would remove the input of every node the repository lists \(4; none of them is in .*other\): nothing published/)
})

test("a re-signing re-signs every node document, the switch to --node-documents-only included; a documents-only publish of node inputs says it wrote their documents and left index.json as it was (text and --json)", async (t) => {
  const {dir, repo, nodes} = await repository(t)
  const {key} = await keyPair(dir, 'release')
  for (const node of ['web1', 'web2']) await writeFile(join(nodes, `${node}.yaml`), GOOD)
  t.is((await cli(['publish', '--inputs', nodes, '--repo', repo, '--puppet', 'none', '--sign', key])).exitCode, 0)
  const index = async () => JSON.parse(await readFile(join(repo, 'index.json'), 'utf8'))
  const documents = async () => Promise.all(['web1', 'web2'].map(async (node) => (await nodeDocument(repo, node)).json))

  // The switch (a re-signing with the flag), then a plain re-signing: every document gets the index's new expiry and a new version.
  for (const [flags, expires] of [[['--node-documents-only'], '7d'], [[], '3d']] as const) {
    const before = await documents()
    const resigned = await cli(['publish', ...flags, '--repo', repo, '--expires', expires, '--sign', key])
    t.is(resigned.exitCode, 0, resigned.stderr)
    const after = await documents()
    t.true((await index()).nodesInDocuments)
    for (const [i, document] of after.entries()) {
      t.is(document.expires, (await index()).expires, `${flags.join(' ')} --expires ${expires}: web${i + 1}'s document expires with the index`)
      t.true(document.version > before[i].version)
    }
  }

  // One node's input, documents only: its document is written, index.json is not, and the line says so.
  const {version, expires} = await index()
  await writeFile(join(nodes, 'web1.yaml'), GOOD.replace('80', '8080'))
  const one = await cli(['publish', '--node', 'web1', '--input', join(nodes, 'web1.yaml'), '--repo', repo, '--puppet', 'none', '--sign', key])
  t.is(one.exitCode, 0, one.stderr)
  const web1 = (await nodeDocument(repo, 'web1')).json
  t.like(await index(), {version, expires})
  t.regex(one.stdout, new RegExp(`^repository [0-9a-f]+: node document version ${web1.version}, expires ${web1.expires}, signed by sha256:[0-9a-f]+; index.json unchanged \\(version ${version}, expires ${expires}\\)$`, 'm'))
  t.notRegex(one.stdout, /index version/)

  for (const node of ['web1', 'web2']) await writeFile(join(nodes, `${node}.yaml`), GOOD.replace('80', '8081'))
  const both = await cli(['publish', '--inputs', nodes, '--repo', repo, '--puppet', 'none', '--json', '--sign', key])
  t.is(both.exitCode, 0, both.stderr)
  const newest = Math.max(...(await documents()).map((document) => document.version))
  t.like(JSON.parse(both.stdout), {indexWritten: false, version, expires, nodeDocuments: {written: 2, removed: 0, version: newest, expires: (await nodeDocument(repo, 'web2')).json.expires}})
})
