import {existsSync} from 'node:fs'
import {mkdir, readFile, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import test, {type ExecutionContext} from 'ava'
import {execa} from 'execa'

import {BIN, REPO, cli, isolatePuppet, statusJson} from '../helpers/cli.js'
import {tempDir, writeTree} from '../helpers/temp.js'

/*
 * integrations/git/{pre,post}-receive in a real bare repository, driven by real `git push`
 * of several tags at once. The hooks call localpuppet through a wrapper that points it at
 * the test's module and state dirs (as the node configuration would) and keeps Puppet's
 * own state in the temp dir.
 */

/** apply --app/--save (issue 9's CLI) in the build under test: the `tag` setting needs them. */
const applyHelp = (await cli(['apply', '--help'])).stdout
const HAS_APP = /--app\b/.test(applyHelp) && /--save\b/.test(applyHelp)

const gitEnv = {GIT_AUTHOR_NAME: 't', GIT_AUTHOR_EMAIL: 't@t', GIT_COMMITTER_NAME: 't', GIT_COMMITTER_EMAIL: 't@t'}
const git = async (args: string[], cwd: string) => execa('git', args, {cwd, env: gitEnv, reject: false})

interface Remote {
  dir: string
  bare: string
  work: string
  modules: string
  state: string
  /** Commits a release whose class notifies `text`, and tags it. */
  release: (tag: string, text: string) => Promise<void>
  push: (...args: string[]) => Promise<{exitCode: number; stderr: string}>
  /** The pusher's `remote: localpuppet: ...` lines. */
  lines: (stderr: string) => string[]
}

async function remote(t: ExecutionContext, apply?: string): Promise<Remote> {
  const dir = await tempDir(t)
  const bare = join(dir, 'foo.git')
  const work = join(dir, 'work')
  const modules = join(dir, 'modules')
  const state = join(dir, 'state')
  await mkdir(modules)
  await git(['init', '--quiet', '--bare', bare], dir)
  // The node configuration the hooks' localpuppet reads (as /etc/localpuppet/config.yaml would be).
  const config = join(dir, 'config.yaml')
  const settings = {module_dir: modules, state_dir: state, input: join(dir, 'input.yaml'), puppet_args: isolatePuppet(dir)}
  await writeFile(config, Object.entries(settings).map(([key, value]) => `${key}: ${JSON.stringify(value)}`).join('\n') + '\n')
  const wrapper = join(dir, 'localpuppet')
  await writeFile(wrapper, `#!/bin/sh\nLOCALPUPPET_CONFIG='${config}' exec node '${BIN}' "$@"\n`, {mode: 0o755})
  for (const hook of ['pre-receive', 'post-receive']) await execa('cp', [join(REPO, 'integrations/git', hook), join(bare, 'hooks', hook)])
  await git(['--git-dir', bare, 'config', 'localpuppet.bin', wrapper], dir)
  if (apply) await git(['--git-dir', bare, 'config', 'localpuppet.apply', apply], dir)
  await writeTree(dir, {'input.yaml': 'app: foo/tags/1.0.0\nclasses: [foo]\n', 'work/manifest.yaml': 'modulepath: []\n'})
  await git(['init', '--quiet'], work)
  return {
    dir,
    bare,
    work,
    modules,
    state,
    async release(tag, text) {
      await writeTree(work, {'foo/manifests/init.pp': `class foo { notify { '${text}': } }\n`})
      await git(['add', '-A'], work)
      await git(['commit', '--quiet', '--allow-empty', '-m', text], work)
      await git(['tag', '-f', tag], work)
    },
    async push(...args) {
      const result = await git(['push', bare, ...args], work)
      return {exitCode: result.exitCode ?? -1, stderr: String(result.stderr)}
    },
    lines: (stderr) =>
      stderr
        .split('\n')
        .filter((line) => line.startsWith('remote: localpuppet:'))
        .map((line) => line.replace(/^remote: /, '').trimEnd()),
  }
}

test('every tag of one push is installed, each with its own line; a branch push installs nothing', async (t) => {
  const r = await remote(t)
  await r.release('1.4.0', 'one four')
  await r.release('1.5.0', 'one five')
  await r.release('1.6.0', 'one six')
  const first = await r.push('1.4.0', '1.5.0')
  t.is(first.exitCode, 0, first.stderr)
  t.deepEqual(r.lines(first.stderr), ['localpuppet: foo/tags/1.4.0: installed', 'localpuppet: foo/tags/1.5.0: installed'])
  for (const tag of ['1.4.0', '1.5.0']) t.true(existsSync(join(r.modules, 'foo/tags', tag, 'foo/manifests/init.pp')), tag)
  t.regex(await readFile(join(r.modules, 'foo/tags/1.5.0/foo/manifests/init.pp'), 'utf8'), /one five/)

  const rest = await r.push('--tags')
  t.is(rest.exitCode, 0, rest.stderr)
  t.deepEqual(r.lines(rest.stderr), ['localpuppet: foo/tags/1.6.0: installed'])
  const again = await r.push('--tags')
  t.regex(again.stderr, /Everything up-to-date/)

  const branch = await r.push('HEAD:refs/heads/main')
  t.is(branch.exitCode, 0)
  t.deepEqual(r.lines(branch.stderr), [])
  const releases = await cli(['releases', 'foo', '--module-dir', r.modules, '--json'])
  t.deepEqual(
    JSON.parse(releases.stdout)[0].tags.map((tag: {tag: string}) => tag.tag),
    ['1.6.0', '1.5.0', '1.4.0'],
  )
})

test('pre-receive refuses a rewritten or deleted tag before it lands; the node keeps what it installed', async (t) => {
  const r = await remote(t)
  await r.release('1.4.0', 'original')
  t.is((await r.push('1.4.0')).exitCode, 0)
  const before = (await git(['--git-dir', r.bare, 'rev-parse', 'refs/tags/1.4.0'], r.dir)).stdout

  await r.release('1.4.0', 'rewritten') // git tag -f: the same name on other content
  await r.release('1.7.0', 'new')
  const forced = await r.push('--force', '1.4.0', '1.7.0')
  t.not(forced.exitCode, 0)
  t.deepEqual(r.lines(forced.stderr), [`localpuppet: refusing to move tag 1.4.0 from ${before.slice(0, 12)} to ${(await git(['rev-parse', '1.4.0'], r.work)).stdout.slice(0, 12)}: tags are immutable; push a new tag instead`])
  t.is((await git(['--git-dir', r.bare, 'rev-parse', 'refs/tags/1.4.0'], r.dir)).stdout, before, 'the bare repository still has the original tag')
  t.is((await git(['--git-dir', r.bare, 'rev-parse', '--verify', '--quiet', 'refs/tags/1.7.0'], r.dir)).exitCode, 1, 'the whole push was refused')
  t.regex(await readFile(join(r.modules, 'foo/tags/1.4.0/foo/manifests/init.pp'), 'utf8'), /original/)

  const deleted = await r.push('--delete', 'refs/tags/1.4.0')
  t.not(deleted.exitCode, 0)
  t.deepEqual(r.lines(deleted.stderr), ['localpuppet: refusing to delete tag 1.4.0: tags are immutable (installed releases keep it)'])
  t.is((await git(['--git-dir', r.bare, 'rev-parse', 'refs/tags/1.4.0'], r.dir)).stdout, before)
})

test('a tag that cannot be installed says why, and the other tags of the push still install', async (t) => {
  const r = await remote(t)
  // foo/tags/2.0.0 is already on the node with other content (installed from elsewhere).
  const other = join(r.dir, 'other')
  await writeTree(other, {'manifest.yaml': 'modulepath: []\n', 'foo/manifests/init.pp': "class foo { notify { 'elsewhere': } }\n"})
  await git(['init', '--quiet'], other)
  await git(['add', '-A'], other)
  await git(['commit', '--quiet', '-m', 'x'], other)
  await git(['tag', '2.0.0'], other)
  t.is((await cli(['install', '--git', other, '--app', 'foo', '--tag', '2.0.0', '--module-dir', r.modules])).exitCode, 0)

  await r.release('2.0.0', 'conflicting')
  await r.release('2.1.0', 'fine')
  const push = await r.push('2.0.0', '2.1.0')
  const lines = r.lines(push.stderr)
  t.is(lines[0], 'localpuppet: foo/tags/2.0.0: NOT installed (exit 73)')
  t.regex(lines[1], /^localpuppet: {3}localpuppet: .*foo\/tags\/2\.0\.0/)
  t.deepEqual(lines.slice(-2), ['localpuppet: foo/tags/2.1.0: installed', 'localpuppet: NOT installed on this node: 2.0.0 (the repository has them; fix and push a new tag)'])
  t.regex(await readFile(join(r.modules, 'foo/tags/2.0.0/foo/manifests/init.pp'), 'utf8'), /elsewhere/)
})

test('localpuppet.apply: the run id comes back to the pusher; a refused apply says so and starts nothing', async (t) => {
  const r = await remote(t, 'input')
  await writeFile(join(r.dir, 'input.yaml'), 'app: foo@^3\nclasses: [foo]\n')
  await r.release('3.0.0', 'three')
  await r.release('3.1.0', 'three one')
  const push = await r.push('3.0.0', '3.1.0')
  t.is(push.exitCode, 0, push.stderr)
  const lines = r.lines(push.stderr)
  t.deepEqual(lines.slice(0, 2), ['localpuppet: foo/tags/3.0.0: installed', 'localpuppet: foo/tags/3.1.0: installed'])
  const started = /^localpuppet: started run (\S+) of the node's input; see: localpuppet status \1$/.exec(lines[2])
  t.truthy(started, lines.join('\n'))
  const id = started![1]
  const waited = await cli(['status', id, '--wait', '--timeout', '120', '--state-dir', r.state, '--json'])
  t.is(waited.exitCode, 0, waited.stdout)
  const record = JSON.parse(waited.stdout)
  t.is(record.release, 'foo/tags/3.1.0')
  t.regex(await readFile(record.log, 'utf8'), /three one/)

  // Puppet disabled: the apply is refused at once, and the pusher reads why.
  const disabled = await cli(['disable', 'migration until 14:00', '--state-dir', r.state, '--', ...isolatePuppet(r.dir)])
  t.is(disabled.exitCode, 0, disabled.stderr)
  await r.release('3.2.0', 'three two')
  const refused = await r.push('3.2.0')
  const refusedLines = r.lines(refused.stderr)
  t.is(refusedLines[0], 'localpuppet: foo/tags/3.2.0: installed')
  t.is(refusedLines[1], "localpuppet: apply of the node's input refused (exit 73), no run started:")
  t.regex(refusedLines.slice(2).join('\n'), /migration until 14:00/)
  t.notRegex(refused.stderr, /started run/)
  // The refusal is recorded (every attempt leaves a trace), and nothing ran.
  const newest = (await statusJson(r.state)).record
  t.not(newest.id, id)
  t.is(newest.state, 'refused', 'no new run: only the refusal')
  t.is(newest.puppetExitCode, null)
})


;(HAS_APP ? test : test.skip)('localpuppet.apply tag: the highest pushed tag is applied and becomes the node\'s release, not the input\'s pinned one', async (t) => {
  const r = await remote(t, 'tag')
  await writeFile(join(r.dir, 'input.yaml'), '# the node\napp: foo/tags/1.0.0   # pinned\nclasses: [foo]\n')
  await r.release('1.0.0', 'one')
  await r.push('1.0.0')
  // That push applied 1.0.0: let its run finish first (another would be refused as busy).
  await cli(['status', '--wait', '--timeout', '120', '--state-dir', r.state])
  await r.release('1.1.0', 'one one')
  await r.release('1.2.0', 'one two')
  const push = await r.push('1.1.0', '1.2.0')
  t.is(push.exitCode, 0, push.stderr)
  const lines = r.lines(push.stderr)
  const started = /^localpuppet: started run (\S+) of foo\/tags\/1\.2\.0; see: localpuppet status \1$/.exec(lines[2])
  t.truthy(started, lines.join('\n'))
  const waited = await cli(['status', started![1], '--wait', '--timeout', '120', '--state-dir', r.state, '--json'])
  t.is(waited.exitCode, 0, waited.stdout)
  t.is(JSON.parse(waited.stdout).release, 'foo/tags/1.2.0')
  t.is(await readFile(join(r.dir, 'input.yaml'), 'utf8'), '# the node\napp: foo/tags/1.2.0   # pinned\nclasses: [foo]\n')
})
