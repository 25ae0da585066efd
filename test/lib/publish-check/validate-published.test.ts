import {readFile, readdir, rename, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import test, {type ExecutionContext} from 'ava'

import {packRelease} from '../../../src/lib/archive/pack.js'
import type {LocalpuppetError} from '../../../src/lib/errors.js'
import type {RefusedInputsError} from '../../../src/lib/publish-check/validate-published.js'
import {promoteChannel} from '../../../src/lib/repository/promote.js'
import {nodeInputsIn} from '../../../src/lib/repository/publish-inputs.js'
import {publishArchives} from '../../../src/lib/repository/publish.js'
import {exists, tempDir, writeTree} from '../../helpers/temp.js'

// The fleet: class nc4site takes a greeting (defaulted) and a port (required); 1.1.0 adds a motd.
const NC4SITE = (extra = '') => `class nc4site (\n  String $greeting = 'hello',\n  Integer $port,${extra}\n) {\n  notify { "\${greeting} on \${port}": }\n}\n`

interface Fixture {
  dir: string
  repo: string
  archives: Record<string, string>
  /** Writes a node input file and returns it as publish takes it. */
  input(node: string, text: string): Promise<{node: string; file: string}>
  /** index.json's bytes now. */
  indexBytes(): Promise<string>
}

/** A repository with web 1.0.0 published; web 1.1.0 packed (not published) beside it. */
async function fixture(t: ExecutionContext): Promise<Fixture> {
  const dir = await tempDir(t)
  const modules = join(dir, 'modules')
  await writeTree(modules, {
    'web/tags/1.0.0/nc4site/manifests/init.pp': NC4SITE(),
    'web/tags/1.1.0/nc4site/manifests/init.pp': NC4SITE('\n  String $motd = \'\','),
  })
  const archives: Record<string, string> = {}
  for (const tag of ['1.0.0', '1.1.0']) {
    archives[tag] = join(dir, `web-${tag}.tar.gz`)
    await packRelease({moduleDir: modules, ref: `web/tags/${tag}`, output: archives[tag]})
  }

  const repo = join(dir, 'repo')
  await publishArchives({repo, archives: [archives['1.0.0']]})
  return {
    dir,
    repo,
    archives,
    async input(node, text) {
      const file = join(dir, `${node}.yaml`)
      await writeFile(file, text)
      return {node, file}
    },
    indexBytes: () => readFile(join(repo, 'index.json'), 'utf8'),
  }
}

const good = 'app: web/tags/1.0.0\nclasses:\n  nc4site:\n    port: 80\n'

async function refused(t: ExecutionContext, promise: Promise<unknown>, exitCode: number): Promise<LocalpuppetError & {problems?: RefusedInputsError['problems']}> {
  const error = (await promise.then(
    () => null,
    (error: unknown) => error,
  )) as LocalpuppetError & {problems?: RefusedInputsError['problems']}
  t.truthy(error, 'refused')
  t.is(error.exitCode, exitCode, error.message)
  return error
}

test('a misspelt class, an unknown parameter and a missing required parameter are refused (65), one problem each naming file, line and key, with did-you-mean; nothing is published', async (t) => {
  const f = await fixture(t)
  const before = await f.indexBytes()
  const nodes = [
    await f.input('web1', 'app: web/tags/1.0.0\nclasses:\n  nc4sit:\n    port: 80\n'),
    await f.input('web2', 'app: web/tags/1.0.0\nclasses:\n  nc4site:\n    port: 80\n    greting: hi\n'),
    await f.input('web3', 'app: web/tags/1.0.0\nclasses:\n  nc4site:\n    greeting: hi\n'),
    await f.input('web4', good),
  ]
  const error = await refused(t, publishArchives({repo: f.repo, archives: [], nodes}), 65)
  t.regex(error.message, /^3 of 4 node inputs refused \(3 problems: .*\); nothing published$/)
  const problems = error.problems!
  t.deepEqual(
    problems.map((p) => [p.node, p.line]),
    [
      ['web1', 3],
      ['web2', 5],
      ['web3', 3],
    ],
  )
  t.regex(problems[0].message, new RegExp(`^${join(f.dir, 'web1.yaml')}:3: class nc4sit is not defined on the modulepath .*; did you mean nc4site\\?$`))
  t.regex(problems[1].message, new RegExp(`^${join(f.dir, 'web2.yaml')}:5: class nc4site has no parameter greting \\(did you mean greeting\\?\\)`))
  t.regex(problems[2].message, new RegExp(`^${join(f.dir, 'web3.yaml')}:3: Class\\[Nc4site\\]: expects a value for parameter 'port' \\(web/tags/1.0.0/nc4site/manifests/init.pp:1\\)$`))
  // All or nothing: the good input is not published either.
  t.is(await f.indexBytes(), before)
  t.false(await exists(join(f.repo, 'inputs')))
})

test('all or nothing: with an archive given to the same publish, one refused input leaves the index and the repository as they were', async (t) => {
  const f = await fixture(t)
  const before = await f.indexBytes()
  const nodes = [await f.input('web1', 'app: web/tags/1.1.0\nclasses:\n  nc4site:\n    port: 80\n    motd: hi\n'), await f.input('web2', 'app: web/tags/1.1.0\nclasses:\n  nc4site:\n    port: 80\n    mtod: hi\n')]
  const error = await refused(t, publishArchives({repo: f.repo, archives: [f.archives['1.1.0']], nodes}), 65)
  t.is(error.problems!.length, 1)
  t.regex(error.problems![0].message, /class nc4site has no parameter mtod \(did you mean motd\?\)/)
  t.is(await f.indexBytes(), before)
  t.deepEqual(await readdir(join(f.repo, 'archives', 'web')), ['web-1.0.0.tar.gz'])
  t.false(await exists(join(f.repo, 'inputs')))
  // Fixed, the same publish goes through: the new tag's archive given is what the inputs are checked against.
  await writeFile(nodes[1].file, 'app: web/tags/1.1.0\nclasses:\n  nc4site:\n    port: 80\n')
  const published = await publishArchives({repo: f.repo, archives: [f.archives['1.1.0']], nodes})
  t.deepEqual(
    published.nodes.map((n) => [n.node, n.status]),
    [
      ['web1', 'added'],
      ['web2', 'added'],
    ],
  )
})

test("an input on a channel or a range is checked against the tag the repository resolves it to, not another", async (t) => {
  const f = await fixture(t)
  await publishArchives({repo: f.repo, archives: [f.archives['1.1.0']]})
  await promoteChannel({repo: f.repo, release: 'web/tags/1.0.0', channel: 'stable'})
  const motd = (app: string) => `app: ${app}\nclasses:\n  nc4site:\n    port: 80\n    motd: hi\n`
  // stable is 1.0.0, which has no motd; the range's newest match, 1.1.0, has.
  const error = await refused(t, publishArchives({repo: f.repo, archives: [], nodes: [await f.input('web1', motd('web/channels/stable')), await f.input('web2', motd('web@^1'))]}), 65)
  t.deepEqual(
    error.problems!.map((p) => p.node),
    ['web1'],
  )
  t.regex(error.problems![0].message, /class nc4site has no parameter motd/)
})

test("the release an input names must be in the repository: a tag it lacks is 66, its archive missing is 66, its archive changed is 65; nothing published", async (t) => {
  const f = await fixture(t)
  const before = await f.indexBytes()
  // With an archive given to the same publish: it is not copied in either (it used to be, before the 66).
  const lacking = await refused(t, publishArchives({repo: f.repo, archives: [f.archives['1.1.0']], nodes: [await f.input('web1', 'app: web/tags/9.0.0\nclasses: [nc4site]\n')]}), 66)
  t.regex(lacking.message, /node web1's app web\/tags\/9\.0\.0: the repository has no tag 9\.0\.0 of web/)
  t.deepEqual(await readdir(join(f.repo, 'archives', 'web')), ['web-1.0.0.tar.gz'])
  const stored = join(f.repo, 'archives', 'web', 'web-1.0.0.tar.gz')
  await rename(stored, `${stored}.away`)
  const missing = await refused(t, publishArchives({repo: f.repo, archives: [], nodes: [await f.input('web1', good)]}), 66)
  t.regex(missing.message, /web-1\.0\.0\.tar\.gz: missing from the repository \(web\/tags\/1\.0\.0, which node web1's input resolves to\)/)
  const bytes = await readFile(`${stored}.away`)
  bytes[bytes.length - 1] ^= 1
  await writeFile(stored, bytes)
  const changed = await refused(t, publishArchives({repo: f.repo, archives: [], nodes: [await f.input('web1', good)]}), 65)
  t.regex(changed.message, /web-1\.0\.0\.tar\.gz: .*\(web\/tags\/1\.0\.0, which node web1's input resolves to; not what the repository's index lists\); nothing published$/)
  t.deepEqual(changed.suggestions, ["publish web/tags/1.0.0's archive again: it repairs the repository's copy"])
  t.is(await f.indexBytes(), before)
})

test('--prune removes the inputs of nodes not given, from the index and the repository, and says which; without it nothing is removed; a prune of every node is refused (64)', async (t) => {
  const f = await fixture(t)
  const nodes = [await f.input('web1', good), await f.input('web2', good), await f.input('web3', good)]
  await publishArchives({repo: f.repo, archives: [], nodes})
  const kept = await publishArchives({repo: f.repo, archives: [], nodes: [nodes[0]]})
  t.deepEqual(kept.pruned, [])
  t.deepEqual(Object.keys(JSON.parse(await f.indexBytes()).nodes), ['web1', 'web2', 'web3'])

  const everything = await refused(t, publishArchives({repo: f.repo, archives: [], nodes: [await f.input('db1', good)], prune: true, pruneFrom: 'nodes/'}), 64)
  t.regex(everything.message, /--prune would remove the input of every node the repository lists \(3; none of them is in nodes\/\): nothing published/)
  t.deepEqual(Object.keys(JSON.parse(await f.indexBytes()).nodes), ['web1', 'web2', 'web3'])

  const pruned = await publishArchives({repo: f.repo, archives: [], nodes: [nodes[0]], prune: true, pruneFrom: 'nodes/'})
  t.deepEqual(pruned.pruned, ['web2', 'web3'])
  t.deepEqual(Object.keys(JSON.parse(await f.indexBytes()).nodes), ['web1'])
  t.deepEqual(await readdir(join(f.repo, 'inputs')), ['web1'])
  // A repository of one node renamed is obviously meant.
  const renamed = await publishArchives({repo: f.repo, archives: [], nodes: [await f.input('web1-new', good)], prune: true})
  t.deepEqual(renamed.pruned, ['web1'])
  t.deepEqual(await readdir(join(f.repo, 'inputs')), ['web1-new'])
})

test('a layered input is judged merged with the layers it names, from this publish or the repository; a wrong value in a layer is refused naming it', async (t) => {
  const f = await fixture(t)
  const layers = join(f.dir, 'ops-layers')
  await writeTree(layers, {'site/dc1.yaml': 'classes:\n  nc4site:\n    port: 80\n'})
  const node = await f.input('web1', 'app: web/tags/1.0.0\nlayers:\n  - site/dc1\nclasses:\n  nc4site:\n    greeting: hi\n')
  // The port the class requires comes from the layer, published with it.
  await publishArchives({repo: f.repo, archives: [], nodes: [node], layers})
  // Then from the repository alone, with no --layers.
  const again = await f.input('web2', 'app: web/tags/1.0.0\nlayers:\n  - site/dc1\n')
  await publishArchives({repo: f.repo, archives: [], nodes: [again]})
  // A layer giving a wrong value is refused (65), nothing published.
  await writeTree(layers, {'site/dc2.yaml': 'classes:\n  nc4site:\n    port: eighty\n'})
  const before = await f.indexBytes()
  const bad = await f.input('web3', 'app: web/tags/1.0.0\nlayers:\n  - site/dc2\n')
  const error = await refused(t, publishArchives({repo: f.repo, archives: [], nodes: [bad], layers}), 65)
  t.regex(error.problems!.map((problem) => problem.message).join('\n'), /site\/dc2/)
  t.is(await f.indexBytes(), before)
})

test('--prune refuses (64, nothing published) to remove a node whose input is in DIR under a name publish does not read (web2.yml, web3.YAML): a renamed file would otherwise cost that node its input', async (t) => {
  const f = await fixture(t)
  await publishArchives({repo: f.repo, archives: [], nodes: [await f.input('web1', good), await f.input('web2', good), await f.input('web3', good)]})
  const before = await f.indexBytes()
  const dir = join(f.dir, 'nodes')
  await writeTree(dir, {'web1.yaml': good, 'web2.yml': good, 'web3.YAML': good, 'notes.txt': 'web3'})
  const error = await refused(t, publishArchives({repo: f.repo, archives: [], nodes: await nodeInputsIn(dir), prune: true, pruneFrom: dir}), 64)
  t.regex(error.message, /--prune would remove the input of node web2 \(DIR has web2\.yml\) and of node web3 \(DIR has web3\.YAML\).*nothing published/)
  t.is(await f.indexBytes(), before)
})

test('an input of 3,000 misspelt classes is refused with each one on its own line, every problem listed (each problem parsed the whole input again for its line: quadratic, minutes for this one)', async (t) => {
  const f = await fixture(t)
  const count = 3000
  const text = `app: web/tags/1.0.0\nclasses:\n${Array.from({length: count}, (_, i) => `  nc4sit${i}: {}\n`).join('')}`
  const error = await refused(t, publishArchives({repo: f.repo, archives: [], nodes: [await f.input('web1', text)]}), 65)
  t.is(error.problems!.length, count)
  t.deepEqual(error.problems!.map((problem) => problem.line), Array.from({length: count}, (_, i) => i + 3))
  t.regex(error.problems![0].message, /web1\.yaml:3: .*nc4sit0/)
})
