import {existsSync, readdirSync} from 'node:fs'
import {chmod, chown, cp, mkdir, readFile, rename, symlink, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import test, {type ExecutionContext} from 'ava'

import {FAKE_PUPPET, FIXTURES, cli, statusJson} from '../helpers/cli.js'
import {asHostile, hostileUid} from '../helpers/hostile-user.js'
import {tempDir, writeTree} from '../helpers/temp.js'

// Every attack of issue 10's "Trust" section, carried out as an unprivileged user made
// with useradd, against localpuppet running as root (as CI does).
const uid = hostileUid()
const asRoot = uid === null ? test.skip : test
const DEMO = join(FIXTURES, 'demo')

/** A demo module dir and a state dir in a temp dir the hostile user can traverse. */
async function setup(t: ExecutionContext) {
  const dir = await tempDir(t)
  await chmod(dir, 0o755)
  const modules = join(dir, 'modules')
  await cp(join(DEMO, 'modules'), modules, {recursive: true})
  const fake = join(dir, 'fake')
  await mkdir(fake)
  const state = join(dir, 'state')
  const input = join(DEMO, 'input.yaml')
  const env = {FAKE_PUPPET_DIR: fake, FAKE_PUPPET_SLEEP: '0'}
  const run = (command: string, ...extra: string[]) => cli([command, input, '--module-dir', modules, '--state-dir', state, '--puppet', FAKE_PUPPET, ...extra], {env})
  return {dir, modules, state, fake, env, run}
}

asRoot('a state dir owned by another user: apply refuses (77) before writing or running anything; --allow-untrusted runs and records it', async (t) => {
  const {state, fake, run} = await setup(t)
  await mkdir(state, {mode: 0o755})
  await chown(state, uid!, uid!)
  // The attack: the owner plants an ENC for the next run to pick up.
  asHostile(`mkdir -p ${state}/runs && printf '#!/bin/sh\\ntouch ${fake}/pwned\\n' > ${state}/runs/enc && chmod 755 ${state}/runs/enc`)
  const refused = await run('apply')
  t.is(refused.exitCode, 77, refused.stderr)
  t.is(refused.stderr.split('\n')[0], `localpuppet: state directory ${state} is not trusted: owned by uid ${uid}, not root or uid 0 (owner uid ${uid}, mode 0755); fix: chown root ${state}`)
  t.deepEqual(readdirSync(join(state, 'runs')), ['enc'], 'no run was started')
  t.false(existsSync(join(fake, 'args')), 'puppet never ran')
  const plan = await run('plan')
  t.is(plan.exitCode, 77, 'plan refuses alike')

  const allowed = await run('apply', '--allow-untrusted', '--json')
  t.is(allowed.exitCode, 0, allowed.stderr)
  const record = JSON.parse(allowed.stdout)
  t.true(record.allowUntrusted)
  t.regex(record.untrusted[0], /^state directory .* owned by uid/)
})

asRoot('a world-writable state dir owned by root is refused too (77)', async (t) => {
  const {state, run} = await setup(t)
  await mkdir(state)
  await chmod(state, 0o777)
  const result = await run('apply')
  t.is(result.exitCode, 77)
  t.regex(result.stderr, /writable by group and others \(owner uid 0, mode 0777\); fix: chmod go-w/)
})

asRoot('a world-writable module dir: the swapped tag is never run (77)', async (t) => {
  const {modules, fake, run} = await setup(t)
  await chmod(join(modules, 'foo', 'tags'), 0o777)
  // The attack: move the installed tag aside and put one's own in its place.
  asHostile(`mv ${modules}/foo/tags/1.4.0 ${modules}/foo/tags/.old && mkdir -p ${modules}/foo/tags/1.4.0/foo/manifests && echo 'class foo { exec { "/bin/true": } }' > ${modules}/foo/tags/1.4.0/foo/manifests/init.pp`)
  const result = await run('apply')
  t.is(result.exitCode, 77, result.stderr)
  // The range foo@^1.4 is not even read from a tags directory others can write.
  t.regex(result.stderr, new RegExp(`^localpuppet: foo/tags directory ${modules}/foo/tags is not trusted: writable by group and others`))
  t.false(existsSync(join(fake, 'args')), 'puppet never ran')

  await chmod(join(modules, 'foo', 'tags'), 0o755)
  await chmod(modules, 0o777)
  const whole = await run('plan')
  t.is(whole.exitCode, 77)
  t.regex(whole.stderr, /^localpuppet: module directory .*modules is not trusted/)
})

asRoot('a release holding a file others can write, or a directory another user owns: apply and plan refuse (77) naming it; --allow-untrusted runs and records it', async (t) => {
  const {modules, fake, run} = await setup(t)
  const file = join(modules, 'foo', 'tags', '1.4.0', 'foo', 'manifests', 'init.pp')
  await chmod(file, 0o666)
  // The attack: rewrite the code root is about to run (the tag and the directories above it are fine).
  asHostile(`echo 'class foo { exec { "/bin/true": } }' > ${file}`)
  const refused = await run('apply')
  t.is(refused.exitCode, 77, refused.stderr)
  t.is(refused.stderr.split('\n')[0], `localpuppet: release foo/tags/1.4.0 holds ${file}, which is not trusted: writable by group and others (owner uid 0, mode 0666); fix: chmod -R go-w ${join(modules, 'foo', 'tags', '1.4.0')}`)
  t.false(existsSync(join(fake, 'args')), 'puppet never ran')
  t.is((await run('plan')).exitCode, 77, 'plan refuses alike')

  await chmod(file, 0o644)
  const dir = join(modules, 'dist', 'tags', '2.0.1', 'platform', 'manifests')
  await chown(dir, uid!, uid!)
  const owned = await run('plan')
  t.is(owned.exitCode, 77)
  t.is(owned.stderr.split('\n')[0], `localpuppet: release dist/tags/2.0.1 holds ${dir}, which is not trusted: owned by uid ${uid}, not root or uid 0 (owner uid ${uid}, mode 0755); fix: chown -R root ${join(modules, 'dist', 'tags', '2.0.1')}`)

  const planned = await run('plan', '--allow-untrusted')
  t.is(planned.exitCode, 0, planned.stderr)
  t.regex(planned.stderr, /warning: --allow-untrusted: release dist\/tags\/2\.0\.1 holds /)
  const allowed = await run('apply', '--allow-untrusted', '--json')
  t.is(allowed.exitCode, 0, allowed.stderr)
  const record = JSON.parse(allowed.stdout)
  t.true(record.allowUntrusted)
  t.deepEqual(record.untrusted.length, 1)
  t.regex(record.untrusted[0], /^release dist\/tags\/2\.0\.1 holds .*platform\/manifests, which is not trusted/)
})

asRoot('from the module dir down nothing may be shared: a sticky <app>/tags (1777, root-owned) lets anyone add a tag root runs (77)', async (t) => {
  const {dir, modules, fake, run} = await setup(t)
  const tags = join(modules, 'foo', 'tags')
  await chmod(tags, 0o1777)
  // The attack: a newer tag that is a link to whatever the attacker likes (an older tag, a
  // downgrade; or trunk, outside the tags directory), and a name that forges a message line.
  asHostile(`ln -s ../../dist/trunk ${tags}/1.9.0 && mkdir "${tags}/$(printf '0.0.1\\nlocalpuppet: all verified')"`)
  const refused = await run('apply')
  t.is(refused.exitCode, 77, refused.stderr)
  const loose = `${tags} is not trusted: writable by group and others (owner uid 0, mode 1777); fix: chmod go-w ${tags}`
  t.is(refused.stderr.split('\n')[0], `localpuppet: foo/tags directory ${loose}`)
  t.false(existsSync(join(fake, 'args')), 'puppet never ran')
  // Named exactly: the link is judged as written (its real path, trunk, is not in the shared directory).
  await writeFile(join(dir, 'exact.yaml'), 'app: foo/tags/1.9.0\n')
  const exact = await cli(['plan', join(dir, 'exact.yaml'), '--module-dir', modules, '--state-dir', join(dir, 'state')])
  t.is(exact.exitCode, 77, exact.stderr)
  t.is(exact.stderr.split('\n')[0], `localpuppet: release foo/tags/1.9.0's parent directory ${loose}`)
  // Allowed: the names are listed, each on the one line.
  await writeFile(join(dir, 'none.yaml'), 'app: foo@^5\n')
  const none = await cli(['plan', join(dir, 'none.yaml'), '--module-dir', modules, '--state-dir', join(dir, 'state'), '--allow-untrusted'])
  t.is(none.exitCode, 66)
  t.regex(none.stderr, /; tags: 1\.9\.0, 1\.4\.0, 1\.3\.0, "0\.0\.1\\nlocalpuppet: all verified"$/m)
})

asRoot('the main manifest is code too: apply refuses one others can write (77); validate --compile, as root, compiles nothing others can change', async (t) => {
  const {dir, modules, fake, env, run} = await setup(t)
  const manifest = join(dir, 'site.pp')
  await writeFile(manifest, 'notice("site")\n', {mode: 0o666})
  await chmod(manifest, 0o666)
  const refused = await run('apply', '--manifest', manifest)
  t.is(refused.exitCode, 77, refused.stderr)
  t.is(refused.stderr.split('\n')[0], `localpuppet: manifest ${manifest} is not trusted: writable by group and others (owner uid 0, mode 0666); fix: chmod go-w ${manifest}`)
  t.false(existsSync(join(fake, 'args')), 'puppet never ran')

  const file = join(modules, 'foo', 'tags', '1.4.0', 'foo', 'manifests', 'init.pp')
  await chmod(file, 0o666)
  const validated = await cli(['validate', join(DEMO, 'input.yaml'), '--module-dir', modules, '--compile', '--puppet', FAKE_PUPPET, '--format', 'json'], {env})
  t.is(validated.exitCode, 65, validated.stderr)
  const [report] = JSON.parse(validated.stdout).inputs
  t.like(report.compile, {status: 'skipped'})
  t.regex(report.problems[0].message, /release foo\/tags\/1\.4\.0 holds .*init\.pp, which is not trusted: writable by group and others/)
})

asRoot('the input is what root applies: an input file others can write or own is refused (77) before it is read, and the refusal recorded; --allow-untrusted runs and records it', async (t) => {
  const {dir, modules, state, fake, env} = await setup(t)
  const input = join(dir, 'input.yaml')
  await writeFile(input, await readFile(join(DEMO, 'input.yaml')))
  await chmod(input, 0o666)
  // The attack: a class with a parameter of one's own choosing, applied by root.
  asHostile(`printf 'app: foo@^1.4\\nclasses:\\n  foo: {}\\n' > ${input}`)
  const run = (command: string, ...extra: string[]) => cli([command, input, '--module-dir', modules, '--state-dir', state, '--puppet', FAKE_PUPPET, ...extra], {env})
  const refused = await run('apply')
  t.is(refused.exitCode, 77, refused.stderr)
  t.is(refused.stderr.split('\n')[0], `localpuppet: input file ${input} is not trusted: writable by group and others (owner uid 0, mode 0666); fix: chmod go-w ${input}`)
  t.regex(refused.stderr, /others may already have changed it: review it after the fix/)
  t.false(existsSync(join(fake, 'args')), 'puppet never ran')
  const status = await statusJson(state)
  t.like(status.record, {state: 'refused', exitCode: 77})
  t.is((await run('plan')).exitCode, 77, 'plan refuses alike')

  await chmod(input, 0o644)
  await chown(input, uid!, uid!)
  const owned = await run('plan')
  t.is(owned.exitCode, 77)
  t.is(owned.stderr.split('\n')[0], `localpuppet: input file ${input} is not trusted: owned by uid ${uid}, not root or uid 0 (owner uid ${uid}, mode 0644); fix: chown root ${input}`)

  const planned = await run('plan', '--allow-untrusted')
  t.is(planned.exitCode, 0, planned.stderr)
  t.regex(planned.stderr, /warning: --allow-untrusted: input file .* owned by uid/)
  const allowed = await run('apply', '--allow-untrusted', '--json')
  t.is(allowed.exitCode, 0, allowed.stderr)
  t.deepEqual(JSON.parse(allowed.stdout).untrusted, [`input file ${input} is not trusted: owned by uid ${uid}, not root or uid 0 (owner uid ${uid}, mode 0644); fix: chown root ${input}`])
  // The background half of --detach records it too.
  const detached = await run('apply', '--allow-untrusted', '--detach', '--json')
  t.is(detached.exitCode, 0, detached.stderr)
  const {id} = JSON.parse(detached.stdout)
  const waited = await cli(['status', id, '--state-dir', state, '--wait', '--json'])
  t.regex(JSON.parse(waited.stdout).untrusted[0], /^input file .* owned by uid/)

  // validate --compile as root: its parameters reach the release's functions, so it is not compiled.
  const validated = await cli(['validate', input, '--module-dir', modules, '--compile', '--puppet', FAKE_PUPPET, '--format', 'json'], {env})
  t.is(validated.exitCode, 65, validated.stderr)
  const [report] = JSON.parse(validated.stdout).inputs
  t.like(report.compile, {status: 'skipped'})
  t.like(report.problems[0], {check: 'input', message: `input file ${input} is not trusted: owned by uid ${uid}, not root or uid 0 (owner uid ${uid}, mode 0644); fix: chown root ${input}`})

  // A directory on the way another user owns: they could swap the file.
  const theirs = join(dir, 'theirs')
  await mkdir(theirs)
  await chown(theirs, uid!, uid!)
  const inTheirs = join(theirs, 'input.yaml')
  await writeFile(inTheirs, await readFile(join(DEMO, 'input.yaml')))
  const parent = await cli(['plan', inTheirs, '--module-dir', modules, '--state-dir', state])
  t.is(parent.exitCode, 77)
  t.regex(parent.stderr, new RegExp(`^localpuppet: input file's parent directory ${theirs} is not trusted: owned by uid ${uid}`))
  // Standard input is the caller's own choice: nothing to judge.
  const stdin = await cli(['plan', '-', '--module-dir', modules, '--state-dir', state], {input: await readFile(inTheirs, 'utf8')})
  t.is(stdin.exitCode, 0, stdin.stderr)
  // A missing input is still "not found" (66), not a trust problem.
  t.is((await cli(['plan', join(dir, 'missing.yaml'), '--module-dir', modules, '--state-dir', state])).exitCode, 66)
})

asRoot('a puppet executable others can write is never run as root: apply, plan, validate and disable refuse it (77); status does not ask it', async (t) => {
  const {dir, modules, state, fake, env} = await setup(t)
  const bin = join(dir, 'bin')
  await mkdir(bin)
  const puppet = join(bin, 'puppet')
  await cp(FAKE_PUPPET, puppet)
  await chmod(puppet, 0o777)
  const line = `localpuppet: puppet executable ${puppet} is not trusted: writable by group and others (owner uid 0, mode 0777); fix: chmod go-w ${puppet}`
  const apply = await cli(['apply', join(DEMO, 'input.yaml'), '--module-dir', modules, '--state-dir', state, '--puppet', puppet], {env})
  t.is(apply.exitCode, 77, apply.stderr)
  t.is(apply.stderr.split('\n')[0], line)
  t.false(existsSync(join(fake, 'args')), 'puppet never ran')
  const plan = await cli(['plan', join(DEMO, 'input.yaml'), '--module-dir', modules, '--state-dir', state, '--puppet', puppet], {env})
  t.is(plan.exitCode, 77)
  // Found on PATH, the same.
  const onPath = await cli(['plan', join(DEMO, 'input.yaml'), '--module-dir', modules, '--state-dir', state, '--puppet', 'puppet'], {env: {...env, PATH: `${bin}:${process.env.PATH}`}})
  t.is(onPath.stderr.split('\n')[0], line)
  const validate = await cli(['validate', join(DEMO, 'input.yaml'), '--module-dir', modules, '--puppet', puppet], {env})
  t.is(validate.exitCode, 77, validate.stderr)
  t.is(validate.stderr.split('\n')[0], line)
  const disable = await cli(['disable', 'maintenance', '--state-dir', state, '--puppet', puppet], {env})
  t.is(disable.exitCode, 77, disable.stderr)
  t.false(existsSync(join(fake, 'agent_disabled.lock')))
  const status = await cli(['status', '--state-dir', state, '--puppet', puppet, '--json'], {env})
  t.is(JSON.parse(status.stdout).puppetDisabled, null)
  t.false(existsSync(join(state, 'puppet-paths.json')), 'puppet was not asked where its locks are')
  const allowed = await cli(['disable', 'maintenance', '--state-dir', state, '--puppet', puppet, '--allow-untrusted'], {env})
  t.is(allowed.exitCode, 0, allowed.stderr)
  t.is(allowed.stderr.split('\n')[0], `localpuppet: warning: --allow-untrusted: ${line.slice('localpuppet: '.length)}`)

  // A link to root's own puppet, in a shared sticky directory, owned by the attacker: it
  // passes today and points at their script tomorrow (after --splay, say). Refused.
  await chmod(puppet, 0o755)
  const shared = join(dir, 'shared')
  await mkdir(shared)
  await chmod(shared, 0o1777)
  asHostile(`ln -s ${puppet} ${shared}/puppet`)
  const linked = await cli(['plan', join(DEMO, 'input.yaml'), '--module-dir', modules, '--state-dir', state, '--puppet', join(shared, 'puppet')], {env})
  t.is(linked.exitCode, 77)
  t.is(linked.stderr.split('\n')[0], `localpuppet: puppet executable's link ${shared}/puppet is not trusted: owned by uid ${uid}, not root or uid 0, who can point it elsewhere; fix: chown -h root ${shared}/puppet`)

  // `#!/usr/bin/env ruby`: the ruby found on PATH is what root really runs; one in their directory is refused.
  const envPuppet = join(bin, 'env-puppet')
  await writeFile(envPuppet, '#!/usr/bin/env ruby\n', {mode: 0o755})
  const theirs = join(dir, 'theirs')
  await mkdir(theirs)
  await chown(theirs, uid!, uid!)
  asHostile(`printf '#!/bin/sh\\ntouch ${fake}/pwned\\n' > ${theirs}/ruby && chmod 755 ${theirs}/ruby`)
  const viaEnv = await cli(['apply', join(DEMO, 'input.yaml'), '--module-dir', modules, '--state-dir', state, '--puppet', envPuppet], {env: {...env, PATH: `${theirs}:${process.env.PATH}`}})
  t.is(viaEnv.exitCode, 77, viaEnv.stderr)
  t.regex(viaEnv.stderr, new RegExp(`^localpuppet: interpreter of ${envPuppet}'s parent directory ${theirs} is not trusted: owned by uid ${uid}`))
  t.false(existsSync(join(fake, 'pwned')), 'their ruby never ran')

  // A module dir reached through their link in a shared directory: judged as written.
  asHostile(`ln -s ${modules} ${shared}/modules`)
  const moduleLink = await cli(['plan', join(DEMO, 'input.yaml'), '--module-dir', join(shared, 'modules'), '--state-dir', state, '--puppet', FAKE_PUPPET], {env})
  t.is(moduleLink.exitCode, 77)
  t.regex(moduleLink.stderr, new RegExp(`^localpuppet: module directory's link ${shared}/modules is not trusted: owned by uid ${uid}`))
})

asRoot('a release manifest others can write is not believed, even to report what it names: 77 before 66', async (t) => {
  const {modules, run} = await setup(t)
  const manifest = join(modules, 'foo', 'tags', '1.4.0', 'manifest.yaml')
  await chmod(manifest, 0o666)
  asHostile(`echo 'modulepath: [nope/tags/9.9.9]' > ${manifest}`)
  const refused = await run('plan')
  t.is(refused.exitCode, 77, refused.stderr)
  t.is(refused.stderr.split('\n')[0], `localpuppet: release manifest ${manifest} is not trusted: writable by group and others (owner uid 0, mode 0666); fix: chmod go-w ${manifest}`)
  const allowed = await run('plan', '--allow-untrusted')
  t.is(allowed.exitCode, 66, 'allowed, what it says is then found wrong')
})

/** The demo's foo 1.4.0 packed, and published (unsigned) into a directory repository. */
async function demoArchive(dir: string): Promise<{archive: string; repo: string}> {
  const archive = join(dir, 'foo-1.4.0.tar.gz')
  const packed = await cli(['pack', 'foo/tags/1.4.0', '--module-dir', join(DEMO, 'modules'), '-o', archive])
  if (packed.exitCode !== 0) throw new Error(packed.stderr)
  const repo = join(dir, 'repo')
  const published = await cli(['publish', archive, '--repo', repo])
  if (published.exitCode !== 0) throw new Error(published.stderr)
  return {archive, repo}
}

asRoot('install, install --git and fetch refuse a module dir (or its .localpuppet, or the <app>/tags they write into) others can write (77); --allow-untrusted installs with a warning', async (t) => {
  const dir = await tempDir(t)
  await chmod(dir, 0o755)
  const {archive, repo} = await demoArchive(dir)
  const modules = join(dir, 'modules')
  await mkdir(modules, {mode: 0o777})
  await chmod(modules, 0o777)
  const installed = () => existsSync(join(modules, 'foo', 'tags', '1.4.0'))
  const loose = `module directory ${modules} is not trusted: writable by group and others (owner uid 0, mode 0777); fix: chmod go-w ${modules}`
  const install = await cli(['install', archive, '--module-dir', modules])
  t.is(install.exitCode, 77, install.stderr)
  t.is(install.stderr.split('\n')[0], `localpuppet: ${loose}`)
  const fetch = await cli(['fetch', 'foo/tags/1.4.0', '--source', repo, '--module-dir', modules])
  t.is(fetch.exitCode, 77, fetch.stderr)
  t.is(fetch.stderr.split('\n')[0], `localpuppet: ${loose}`)
  t.false(existsSync(join(modules, '.localpuppet')), 'fetch wrote nothing, not even its downloads directory')
  // A git repository of the same tree.
  const git = join(dir, 'git')
  await cp(join(DEMO, 'modules', 'foo', 'tags', '1.4.0'), git, {recursive: true})
  const {execFileSync} = await import('node:child_process')
  for (const args of [['init', '-q'], ['add', '-A'], ['-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-qm', 'x'], ['tag', '1.4.0']]) execFileSync('git', ['-C', git, ...args])
  const gitInstall = await cli(['install', '--git', git, '--app', 'foo', '--tag', '1.4.0', '--module-dir', modules])
  t.is(gitInstall.exitCode, 77, gitInstall.stderr)
  t.is(gitInstall.stderr.split('\n')[0], `localpuppet: ${loose}`)
  t.false(installed())

  const allowed = await cli(['install', archive, '--module-dir', modules, '--allow-untrusted'])
  t.is(allowed.exitCode, 0, allowed.stderr)
  t.is(allowed.stderr, `localpuppet: warning: --allow-untrusted: ${loose}`)
  t.true(installed())

  // The module dir is fine now; its .localpuppet belongs to the attacker.
  await chmod(modules, 0o755)
  await chown(join(modules, '.localpuppet'), uid!, uid!)
  const own = await cli(['fetch', 'foo/tags/1.4.0', '--source', repo, '--module-dir', modules])
  t.is(own.exitCode, 77)
  t.regex(own.stderr, new RegExp(`^localpuppet: module directory ${modules}/.localpuppet is not trusted: owned by uid ${uid}`))
  await chown(join(modules, '.localpuppet'), 0, 0)

  // The <app>/tags the tag goes into is world-writable: the attacker could swap the tag after.
  const other = join(dir, 'other')
  await mkdir(join(other, 'foo', 'tags'), {recursive: true})
  await chmod(join(other, 'foo', 'tags'), 0o777)
  const tags = await cli(['install', archive, '--module-dir', other])
  t.is(tags.exitCode, 77, tags.stderr)
  t.regex(tags.stderr, new RegExp(`^localpuppet: foo/tags directory ${other}/foo/tags is not trusted: writable by group and others`))
  t.false(existsSync(join(other, 'foo', 'tags', '1.4.0')))
  const fetched = await cli(['fetch', 'foo/tags/1.4.0', '--source', repo, '--module-dir', other, '--allow-untrusted', '--json'])
  t.is(fetched.exitCode, 0, fetched.stderr)
  t.regex(JSON.parse(fetched.stdout).untrusted[0], /^foo\/tags directory .* is not trusted/)
  t.true(existsSync(join(other, 'foo', 'tags', '1.4.0')))
})

asRoot('unsigned, an archive or a directory repository is only as good as its place: one others can write or own is refused (77); signed, it is not judged; --allow-untrusted installs and records it', async (t) => {
  const dir = await tempDir(t)
  await chmod(dir, 0o755)
  const {archive, repo} = await demoArchive(dir)
  const modules = join(dir, 'modules')
  await mkdir(modules)
  const installed = () => existsSync(join(modules, 'foo', 'tags', '1.4.0'))
  // The attack: the archive an operator copied to a shared place, swapped before root installs it.
  const shared = join(dir, 'shared')
  await mkdir(shared)
  await chmod(shared, 0o777)
  const dropped = join(shared, 'foo-1.4.0.tar.gz')
  await cp(archive, dropped)
  const install = await cli(['install', dropped, '--module-dir', modules])
  t.is(install.exitCode, 77, install.stderr)
  t.is(install.stderr.split('\n')[0], `localpuppet: archive's parent directory ${shared} is not trusted: writable by group and others (owner uid 0, mode 0777); fix: chmod go-w ${shared}`)
  t.regex(install.stderr, /sign it \(pack --sign, publish --sign\) and trust the key/)
  t.false(installed())
  await chmod(shared, 0o755)
  await chown(dropped, uid!, uid!)
  const owned = await cli(['install', dropped, '--module-dir', modules])
  t.is(owned.exitCode, 77)
  t.regex(owned.stderr, new RegExp(`^localpuppet: archive ${dropped} is not trusted: owned by uid ${uid}`))
  // Standard input is the caller's own bytes.
  await mkdir(join(dir, 'stdin-modules'))
  const stdin = await cli(['install', '-', '--module-dir', join(dir, 'stdin-modules')], {input: await readFile(dropped)})
  t.is(stdin.exitCode, 0, stdin.stderr)
  const allowed = await cli(['install', dropped, '--module-dir', modules, '--allow-untrusted', '--json'])
  t.is(allowed.exitCode, 0, allowed.stderr)
  t.regex(JSON.parse(allowed.stdout).untrusted[0], /^archive .* owned by uid/)
  t.true(installed())

  // A directory repository, unsigned, that others can write: they could publish anything.
  const other = join(dir, 'other')
  await mkdir(other)
  await chmod(repo, 0o777)
  const fetch = await cli(['fetch', 'foo/tags/1.4.0', '--source', repo, '--module-dir', other])
  t.is(fetch.exitCode, 77, fetch.stderr)
  t.is(fetch.stderr.split('\n')[0], `localpuppet: release repository ${repo} is not trusted: writable by group and others (owner uid 0, mode 0777); fix: chmod go-w ${repo}`)
  t.false(existsSync(join(other, 'foo')))
  await chmod(repo, 0o755)
  await chown(join(repo, 'index.json'), uid!, uid!)
  const index = await cli(['fetch', 'foo/tags/1.4.0', '--source', `file://${repo}`, '--module-dir', other])
  t.is(index.exitCode, 77, index.stderr)
  t.regex(index.stderr, new RegExp(`^localpuppet: release repository index ${repo}/index.json is not trusted: owned by uid ${uid}`))
  // apply --fetch --allow-untrusted: fetched, and the run record says what was let through.
  const state = join(dir, 'state')
  const input = join(dir, 'input.yaml')
  await writeFile(input, 'app: foo/tags/1.4.0\nclasses:\n  foo: {}\n')
  const applied = await cli(['apply', input, '--fetch', '--source', repo, '--module-dir', other, '--state-dir', state, '--puppet', FAKE_PUPPET, '--allow-untrusted', '--json'], {env: {FAKE_PUPPET_DIR: dir, FAKE_PUPPET_SLEEP: '0'}})
  t.is(applied.exitCode, 0, applied.stderr)
  t.regex(JSON.parse(applied.stdout).untrusted[0], /^release repository index .* owned by uid/)

  // Signed and verified, the same files are not judged: the signature vouches for them.
  const {keyPair, demoRepository} = await import('../helpers/repository.js')
  const {key, pub} = await keyPair(dir, 'release')
  const signed = await demoRepository(join(dir, 'signed'), key)
  await mkdir(join(dir, 'fresh'))
  await chmod(signed.repo, 0o777)
  await chmod(join(dir, 'signed'), 0o777)
  const verified = await cli(['fetch', 'foo/tags/1.3.0', '--source', signed.repo, '--module-dir', join(dir, 'fresh'), '--trust', pub])
  t.is(verified.exitCode, 0, verified.stderr)
  const signedInstall = await cli(['install', signed.archives[1], '--module-dir', join(dir, 'fresh'), '--trust', pub])
  t.is(signedInstall.exitCode, 0, signedInstall.stderr)
})

asRoot('a forged puppet-paths.json makes neither disable overwrite nor enable delete a file of its choosing', async (t) => {
  const {dir, state, fake, env} = await setup(t)
  const victim = join(dir, 'victim')
  await writeFile(victim, 'precious\n')
  const lockArgs = ['--state-dir', state, '--puppet', FAKE_PUPPET]
  t.is((await cli(['enable', ...lockArgs], {env})).exitCode, 0)
  const cacheFile = join(state, 'puppet-paths.json')
  const cache = JSON.parse(await readFile(cacheFile, 'utf8'))
  // The forgery: the right key (anyone can compute it), paths of the attacker's choice, their file.
  await writeFile(cacheFile, JSON.stringify({key: cache.key, paths: {catalogRun: victim, disabled: victim}}))
  await chown(cacheFile, uid!, uid!)
  t.is((await cli(['disable', 'maintenance', ...lockArgs], {env})).exitCode, 0)
  t.is(await readFile(victim, 'utf8'), 'precious\n', 'disable did not overwrite the victim')
  t.true(existsSync(join(fake, 'agent_disabled.lock')), 'disable wrote Puppet’s real lock')
  await writeFile(cacheFile, JSON.stringify({key: cache.key, paths: {catalogRun: victim, disabled: victim}}))
  await chown(cacheFile, uid!, uid!)
  t.is((await cli(['enable', ...lockArgs], {env})).exitCode, 0)
  t.true(existsSync(victim), 'enable did not delete the victim')
})

asRoot('status, history and log refuse a state dir another user owns or others can write (77); status --check says UNKNOWN; --allow-untrusted reads it with a warning', async (t) => {
  const {dir, state, run} = await setup(t)
  t.is((await run('apply')).exitCode, 0)
  const read = (...args: string[]) => cli([...args, '--state-dir', state])
  // The attack of the report: a forged run (record and log) in a state dir the attacker owns.
  const [id] = readdirSync(join(state, 'runs'))
  const forged = join(dir, 'forged')
  await cp(join(state, 'runs', id), forged, {recursive: true})
  await chmod(forged, 0o755)
  await chmod(join(forged, 'run.json'), 0o644)
  await chown(state, uid!, uid!)
  asHostile(`cd ${state} && mv runs runs.old && mkdir -p runs/${id} && cp ${forged}/run.json runs/${id}/ && printf 'root:forged\\n' > runs/${id}/puppet.log`)
  const owned = `state directory ${state} is not trusted: owned by uid ${uid}, not root or uid 0 (owner uid ${uid}, mode 0700); fix: chown root ${state}`
  for (const command of ['status', 'history', 'log']) {
    const refused = await read(command)
    t.is(refused.exitCode, 77, `${command}: ${refused.stderr}`)
    t.is(refused.stderr.split('\n')[0], `localpuppet: ${owned}`, command)
    t.false(refused.stdout.includes('forged'), `${command} printed nothing from the state dir`)
  }

  const check = await read('status', '--check')
  t.is(check.exitCode, 3)
  t.is(check.stdout, `LOCALPUPPET UNKNOWN - ${owned}`)
  const allowed = await read('log', '--allow-untrusted')
  t.is(allowed.exitCode, 0, allowed.stderr)
  t.is(allowed.stdout, 'root:forged')
  t.is(allowed.stderr, `localpuppet: warning: --allow-untrusted: ${owned}`)
  t.is((await read('history', '--allow-untrusted', '--json')).exitCode, 0)

  // Root's own state dir with a runs/ others can write is refused alike.
  await chown(state, 0, 0)
  await chown(join(state, 'runs'), 0, 0)
  await chmod(join(state, 'runs'), 0o777)
  const runs = await read('status')
  t.is(runs.exitCode, 77)
  t.regex(runs.stderr, new RegExp(`^localpuppet: state directory ${state}/runs is not trusted: writable by group and others`))
  t.is((await read('status', '--check')).exitCode, 3)
})

test("a forged run.json cannot make log print another file: the log's path is derived", async (t) => {
  const {state, run} = await setup(t)
  const result = await run('apply', '--json')
  t.is(result.exitCode, 0, result.stderr)
  const record = JSON.parse(result.stdout)
  const recordFile = join(state, 'runs', record.id, 'run.json')
  await writeFile(recordFile, JSON.stringify({...record, log: '/etc/shadow'}))
  const log = await cli(['log', '--state-dir', state])
  t.is(log.exitCode, 0)
  t.regex(log.stdout, /fake puppet started/)
  t.false(log.stdout.includes('root:'), '/etc/shadow was not printed')
  // Nor a puppet.log replaced by a link.
  const logFile = join(state, 'runs', record.id, 'puppet.log')
  await rename(logFile, `${logFile}.old`)
  await symlink('/etc/passwd', logFile)
  const linked = await cli(['log', '--state-dir', state])
  t.is(linked.exitCode, 66)
  t.regex(linked.stderr, /a symbolic link, not the run's log/)
})

test('a tag without an install record runs with a warning naming it, listed as unverified in plan --json and the run record', async (t) => {
  const dir = await tempDir(t)
  const {archive} = await demoArchive(dir)
  const modules = join(dir, 'modules')
  await mkdir(modules)
  t.is((await cli(['install', archive, '--module-dir', modules])).exitCode, 0)
  const fake = join(dir, 'fake')
  await mkdir(fake)
  const args = (command: string, ...extra: string[]) => [command, join(DEMO, 'input.yaml'), '--module-dir', modules, '--state-dir', join(dir, 'state'), '--puppet', FAKE_PUPPET, ...extra]
  const env = {FAKE_PUPPET_DIR: fake, FAKE_PUPPET_SLEEP: '0'}
  const recorded = JSON.parse((await cli(args('plan', '--json'))).stdout)
  t.deepEqual(recorded.unverified, [])
  t.deepEqual(recorded.verification.map((entry: {release: string}) => entry.release), ['foo/tags/1.4.0', 'dist/tags/2.0.1'])
  const quiet = await cli(args('apply'), {env})
  t.is(quiet.exitCode, 0, quiet.stderr)
  t.notRegex(quiet.stderr, /install record/)

  // What the report's attacker did: the record moved aside, so the tag is no longer verified.
  await rename(join(modules, '.localpuppet', 'records', 'foo', 'tags', '1.4.0.json'), join(dir, 'record.json'))
  const warning = `${modules}/foo/tags/1.4.0 has no install record, so it cannot be verified; install it with localpuppet install or remove it`
  const plan = JSON.parse((await cli(args('plan', '--json'))).stdout)
  t.deepEqual(plan.unverified, ['foo/tags/1.4.0'])
  t.true(plan.warnings.includes(warning))
  const text = await cli(args('plan'))
  t.is(text.stderr, `localpuppet: warning: ${warning}`)
  t.false(text.stdout.includes('install record'), 'the plan itself (stdout) stays what will run')
  const applied = await cli(args('apply'), {env})
  t.is(applied.exitCode, 0, applied.stderr)
  t.true(applied.stderr.split('\n').includes(`localpuppet: warning: ${warning}`), applied.stderr)
  const {record} = await statusJson(join(dir, 'state'))
  t.deepEqual(record.unverified, ['foo/tags/1.4.0'])
})

test('a tag that is a link to trunk is mutable: a tagged release depending on it is refused (or listed with --allow-mutable), pack refuses it', async (t) => {
  const {dir, modules} = await setup(t)
  await symlink(join(modules, 'dist', 'trunk'), join(modules, 'dist', 'tags', '2.0.2'))
  await writeTree(dir, {'input.yaml': 'app: foo/tags/1.4.0\n'})
  await writeFile(join(modules, 'foo', 'tags', '1.4.0', 'manifest.yaml'), 'modulepath:\n  - dist/tags/2.0.2\n')
  const args = ['plan', join(dir, 'input.yaml'), '--module-dir', modules, '--state-dir', join(dir, 'state')]
  const refused = await cli(args)
  t.is(refused.exitCode, 65)
  t.regex(refused.stderr, /"dist\/tags\/2\.0\.2" is mutable \(a link to dist\/trunk\)/)
  const allowed = await cli([...args, '--allow-mutable', '--json'])
  t.is(allowed.exitCode, 0, allowed.stderr)
  t.deepEqual(JSON.parse(allowed.stdout).mutableEntries, ['dist/tags/2.0.2'])

  const pack = await cli(['pack', 'dist/tags/2.0.2', '--module-dir', modules, '-o', join(dir, 'x.tar.gz')])
  t.is(pack.exitCode, 65)
  t.regex(pack.stderr, /dist\/tags\/2\.0\.2 resolves to dist\/trunk \(a link\), which can change; archives carry tags/)
  t.false(existsSync(join(dir, 'x.tar.gz')))
})

asRoot('a trusted key another user can replace is refused (77) before any archive is trusted with it', async (t) => {
  const dir = await tempDir(t)
  await chmod(dir, 0o755)
  const keys = join(dir, 'keys')
  await mkdir(keys)
  const {execFileSync} = await import('node:child_process')
  execFileSync('openssl', ['genpkey', '-algorithm', 'ed25519', '-out', join(dir, 'k.pem')])
  execFileSync('openssl', ['pkey', '-in', join(dir, 'k.pem'), '-pubout', '-out', join(keys, 'k.pub.pem')])
  await chown(join(keys, 'k.pub.pem'), uid!, uid!)
  const {loadTrustedKeys} = await import('../../src/lib/archive/signature.js')
  const error = await t.throwsAsync(loadTrustedKeys([keys], null))
  t.is((error as unknown as {exitCode: number}).exitCode, 77)
  t.regex(error!.message, /^trusted key .*k\.pub\.pem is not trusted: owned by uid/)
  await chown(join(keys, 'k.pub.pem'), 0, 0)
  await chmod(keys, 0o777)
  t.regex((await t.throwsAsync(loadTrustedKeys([keys], null)))!.message, /^trusted keys directory .*keys is not trusted: writable by group and others/)
  await chmod(keys, 0o755)
  t.is((await loadTrustedKeys([keys], null)).length, 1)
})

asRoot('a node configuration file another user can write is refused (77), naming it', async (t) => {
  const dir = await tempDir(t)
  const config = join(dir, 'config.yaml')
  await writeFile(config, `state_dir: ${join(dir, 'state')}\n`)
  await chown(config, uid!, uid!)
  const result = await cli(['config'], {env: {LOCALPUPPET_CONFIG: config}})
  t.is(result.exitCode, 77, result.stderr)
  t.is(result.stderr.trim(), `localpuppet: configuration ${config} is not trusted: owned by uid ${uid}, not root or uid 0 (owner uid ${uid}, mode 0644); fix: chown root ${config}`)
})

/** The demo's release packed and installed into a fresh module dir only root can write; returns the module dir. */
async function installedDemo(t: ExecutionContext): Promise<string> {
  const dir = await tempDir(t)
  await chmod(dir, 0o755)
  const {archive} = await demoArchive(dir)
  const modules = join(dir, 'modules')
  await mkdir(modules, {mode: 0o755})
  t.is((await cli(['install', archive, '--module-dir', modules])).exitCode, 0)
  return modules
}

asRoot('verify and releases refuse a module dir whose install records others could forge (77); --allow-untrusted reports with a warning', async (t) => {
  const modules = await installedDemo(t)
  await chmod(modules, 0o777)
  const loose = `module directory ${modules} is not trusted: writable by group and others (owner uid 0, mode 0777); fix: chmod go-w ${modules}`
  for (const command of ['verify', 'releases']) {
    const refused = await cli([command, '--module-dir', modules])
    t.is(refused.exitCode, 77, `${command}: ${refused.stderr}`)
    t.is(refused.stderr.split('\n')[0], `localpuppet: ${loose}`)
    t.is(refused.stdout, '')
    const allowed = await cli([command, '--module-dir', modules, '--allow-untrusted'])
    t.is(allowed.exitCode, 0, allowed.stderr)
    t.is(allowed.stderr, `localpuppet: warning: --allow-untrusted: ${loose}`)
    t.regex(allowed.stdout, /verified|ok {8}foo\/tags\/1\.4\.0/)
  }
})

asRoot('verify refuses a tag others could swap (a <app>/tags writable by others): 77, not ok', async (t) => {
  const modules = await installedDemo(t)
  const tags = join(modules, 'foo', 'tags')
  await chmod(tags, 0o777)
  const loose = `release foo/tags/1.4.0's parent directory ${tags} is not trusted: writable by group and others (owner uid 0, mode 0777); fix: chmod go-w ${tags}`
  const refused = await cli(['verify', '--module-dir', modules])
  t.is(refused.exitCode, 77, refused.stderr)
  t.is(refused.stderr.split('\n')[0], `localpuppet: ${loose}`)
  t.is(refused.stdout, '')
  const allowed = await cli(['verify', '--module-dir', modules, '--allow-untrusted'])
  t.is(allowed.exitCode, 0, allowed.stderr)
  t.regex(allowed.stderr, /--allow-untrusted: release foo\/tags\/1\.4\.0/)
})

asRoot('verify and releases refuse a tag holding a file others can write (77), and releases a tag others could swap; --allow-untrusted reports with a warning', async (t) => {
  const modules = await installedDemo(t)
  const root = join(modules, 'foo', 'tags', '1.4.0')
  const file = join(root, 'foo', 'manifests', 'init.pp')
  await chmod(file, 0o646)
  const loose = `release foo/tags/1.4.0 holds ${file}, which is not trusted: writable by others (owner uid 0, mode 0646); fix: chmod -R go-w ${root}`
  for (const command of ['verify', 'releases']) {
    const refused = await cli([command, '--module-dir', modules])
    t.is(refused.exitCode, 77, `${command}: ${refused.stderr}`)
    t.is(refused.stderr.split('\n')[0], `localpuppet: ${loose}`)
    t.is(refused.stdout, '')
    const allowed = await cli([command, '--module-dir', modules, '--allow-untrusted', '--json'])
    t.is(allowed.exitCode, 0, allowed.stderr)
    t.is(allowed.stderr, `localpuppet: warning: --allow-untrusted: ${loose}`)
  }

  const verified = JSON.parse((await cli(['verify', 'foo@1.4.0', '--module-dir', modules, '--allow-untrusted', '--json'])).stdout)
  t.like(verified[0], {release: 'foo/tags/1.4.0', ok: true, untrusted: loose})
  const listed = JSON.parse((await cli(['releases', '--module-dir', modules, '--allow-untrusted', '--json'])).stdout)
  t.like(listed.find((app: {app: string}) => app.app === 'foo').tags[0], {tag: '1.4.0', verified: true, untrusted: loose})

  await chmod(file, 0o444)
  const tags = join(modules, 'foo', 'tags')
  await chmod(tags, 0o777)
  const swapped = await cli(['releases', '--module-dir', modules])
  t.is(swapped.exitCode, 77, swapped.stderr)
  t.is(swapped.stderr.split('\n')[0], `localpuppet: release foo/tags/1.4.0's parent directory ${tags} is not trusted: writable by group and others (owner uid 0, mode 0777); fix: chmod go-w ${tags}`)
})

test('the --allow-untrusted hint fits the command: history and log read records, fetch fetches, apply records it', async (t) => {
  const dir = await tempDir(t)
  const open = join(dir, 'open')
  await mkdir(open)
  await chmod(open, 0o777)
  const hint = async (...args: string[]) => {
    const result = await cli(args)
    t.is(result.exitCode, 77, result.stderr)
    return result.stderr.split('\n').filter((line) => line.includes('--allow-untrusted'))
  }

  t.deepEqual(await hint('history', '--state-dir', open), ['  hint: or pass --allow-untrusted to read its records anyway (with a warning)'])
  t.deepEqual(await hint('log', '--state-dir', open), ['  hint: or pass --allow-untrusted to read its records anyway (with a warning)'])
  t.deepEqual(await hint('fetch', 'foo@^1', '--source', open, '--module-dir', join(DEMO, 'modules')), ['  hint: or pass --allow-untrusted to fetch anyway (with a warning; --json lists it as untrusted)'])
  t.deepEqual(await hint('apply', join(DEMO, 'input.yaml'), '--module-dir', join(DEMO, 'modules'), '--state-dir', open), ['  hint: or pass --allow-untrusted to use it anyway (with a warning; the run record lists it)'])
})
