import {chmod, chown, lchown, mkdir, symlink, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import test from 'ava'

import {UntrustedPathError} from '../../../src/lib/errors.js'
import {assertNoTrustProblems, assertTrustedPath, findTrustProblem, isTrustedEntry, treeTrustProblem} from '../../../src/lib/util/trusted-path.js'
import {hostileUid} from '../../helpers/hostile-user.js'
import {tempDir} from '../../helpers/temp.js'

test('a directory the effective user owns, under root-owned /tmp (sticky), is trusted', async (t) => {
  const dir = await tempDir(t)
  t.is(findTrustProblem(dir, {what: 'state directory'}), null)
  t.is(findTrustProblem(join(dir, 'not', 'yet'), {what: 'state directory'}), null, 'judged by where it will be created')
})

test('a group- or world-writable directory is refused with path, owner, mode and fix (77)', async (t) => {
  const dir = await tempDir(t)
  const state = join(dir, 'state')
  await mkdir(state)
  await chmod(state, 0o777)
  const error = t.throws(() => assertTrustedPath(state, {what: 'state directory'}), {instanceOf: UntrustedPathError})
  t.is(error.exitCode, 77)
  t.is(error.message, `state directory ${state} is not trusted: writable by group and others (owner uid ${process.geteuid!()}, mode 0777); fix: chmod go-w ${state}`)
  await chmod(state, 0o775)
  t.regex(t.throws(() => assertTrustedPath(state, {what: 'state directory'}))!.message, /writable by group \(/)
  t.is(assertTrustedPath(state, {what: 'state directory', allow: true})?.path, state, '--allow-untrusted returns the problem for the record')
})

test('a world-writable parent makes everything below it untrusted, unless it is root-owned and sticky', async (t) => {
  const dir = await tempDir(t)
  const parent = join(dir, 'shared')
  await mkdir(join(parent, 'state'), {recursive: true})
  await chmod(parent, 0o777)
  t.regex(findTrustProblem(join(parent, 'state'), {what: 'state directory'})!.message, /^state directory's parent directory .*shared is not trusted/)
  await chmod(parent, 0o1777)
  t.is(findTrustProblem(join(parent, 'state'), {what: 'state directory'}), null)
  t.not(findTrustProblem(parent, {what: 'state directory'}), null, 'the sticky directory itself is not a state dir')
})

test('a link is judged by where it leads', async (t) => {
  const dir = await tempDir(t)
  await mkdir(join(dir, 'open'))
  await chmod(join(dir, 'open'), 0o777)
  await symlink(join(dir, 'open'), join(dir, 'link'))
  t.not(findTrustProblem(join(dir, 'link'), {what: 'module directory'}), null)
})

const asRoot = hostileUid() === null ? test.skip : test

asRoot('a directory owned by another user is refused, naming the chown fix', async (t) => {
  const uid = hostileUid()!
  const dir = await tempDir(t)
  const state = join(dir, 'state')
  await mkdir(state, {mode: 0o700})
  await chown(state, uid, uid)
  t.is(findTrustProblem(state, {what: 'state directory'})!.message, `state directory ${state} is not trusted: owned by uid ${uid}, not root or uid 0 (owner uid ${uid}, mode 0700); fix: chown root ${state}`)
})

asRoot('a path is judged as the kernel walks it: a link another user owns in a sticky directory, `..` after a link, links through a directory others control', async (t) => {
  const uid = hostileUid()!
  const dir = await tempDir(t)
  await chmod(dir, 0o755)
  const puppet = join(dir, 'puppet')
  await writeFile(puppet, '#!/bin/sh\n', {mode: 0o755})
  // A sticky shared directory, root's: a link there is only as good as its owner, who can repoint it.
  const shared = join(dir, 'shared')
  await mkdir(shared)
  await chmod(shared, 0o1777)
  const theirs = join(shared, 'puppet')
  await symlink(puppet, theirs)
  t.is(findTrustProblem(theirs, {what: 'puppet executable'}), null, "root's own link")
  await lchown(theirs, uid, uid)
  t.is(findTrustProblem(theirs, {what: 'puppet executable'})?.message, `puppet executable's link ${theirs} is not trusted: owned by uid ${uid}, not root or uid 0, who can point it elsewhere; fix: chown -h root ${theirs}`)
  // `tools/away/../puppet`: the kernel goes up from where `away` leads (their directory), not from tools/.
  const tools = join(dir, 'tools')
  const home = join(dir, 'home')
  await mkdir(join(home, 'sub'), {recursive: true})
  await chown(home, uid, uid)
  await writeFile(join(home, 'puppet'), '#!/bin/sh\n', {mode: 0o755})
  await mkdir(tools)
  await writeFile(join(tools, 'puppet'), '#!/bin/sh\n', {mode: 0o755})
  await symlink(join(home, 'sub'), join(tools, 'away'))
  t.regex(findTrustProblem(`${tools}/away/../puppet`, {what: 'puppet executable'})?.message ?? '', new RegExp(`parent directory ${home} is not trusted: owned by uid ${uid}`))
  t.is(findTrustProblem(join(tools, 'puppet'), {what: 'puppet executable'}), null)
  // A chain of links whose middle one lies in their directory: they can change where it ends.
  await symlink(puppet, join(home, 'hop'))
  await symlink(join(home, 'hop'), join(tools, 'chain'))
  t.regex(findTrustProblem(join(tools, 'chain'), {what: 'puppet executable'})?.message ?? '', new RegExp(`parent directory ${home} is not trusted`))
  // A dangling link, or links that loop, in the shared directory: judged by where the walk stopped.
  await symlink('missing', join(shared, 'dangling'))
  t.regex(findTrustProblem(join(shared, 'dangling'), {what: 'state directory'})?.message ?? '', new RegExp(`would be made in ${shared}`))
  await symlink('loop2', join(shared, 'loop1'))
  await symlink('loop1', join(shared, 'loop2'))
  t.not(findTrustProblem(join(shared, 'loop1'), {what: 'state directory'}), null)
  // The kernel's protected_symlinks rule: in a directory only root can write, nobody else can repoint a link, whoever owns it.
  const own = join(dir, 'own')
  await mkdir(own)
  await symlink(puppet, join(own, 'puppet'))
  await lchown(join(own, 'puppet'), uid, uid)
  t.is(findTrustProblem(join(own, 'puppet'), {what: 'puppet executable'}), null)
  // Content another user placed in their own directory: giving root their directory is no fix.
  t.regex(findTrustProblem(join(home, 'puppet'), {what: 'input file', content: true})?.message ?? '', /; fix: copy it into a directory only root can write, and review it$/)
})

test('what a release tree holds: one problem per tree, naming the first entry (byte order), how many more, and one fix for the whole tree', (t) => {
  t.true(isTrustedEntry(0, 0o100444, 0))
  t.true(isTrustedEntry(1000, 0o40755, 1000), 'the effective user')
  t.false(isTrustedEntry(0, 0o100664, 0), 'group-writable')
  t.false(isTrustedEntry(1001, 0o100444, 0), 'owned by another user, who can chmod it back')
  t.is(treeTrustProblem('/m/foo/tags/1.0.0', 'release foo/tags/1.0.0', [], 0), null)
  const one = treeTrustProblem('/m/foo/tags/1.0.0', 'release foo/tags/1.0.0', [{path: '/m/foo/tags/1.0.0/foo/manifests/init.pp', uid: 0, mode: 0o100666}], 0)!
  t.is(one.message, 'release foo/tags/1.0.0 holds /m/foo/tags/1.0.0/foo/manifests/init.pp, which is not trusted: writable by group and others (owner uid 0, mode 0666); fix: chmod -R go-w /m/foo/tags/1.0.0')
  const entries = [
    {path: '/m/foo/tags/1.0.0/foo/templates', uid: 0, mode: 0o40777},
    {path: '/m/foo/tags/1.0.0/foo/lib/x.rb', uid: 1001, mode: 0o100644},
  ]
  const many = treeTrustProblem('/m/foo/tags/1.0.0', 'release foo/tags/1.0.0', entries, 0)!
  t.is(many.path, '/m/foo/tags/1.0.0/foo/lib/x.rb')
  t.is(many.message, 'release foo/tags/1.0.0 holds /m/foo/tags/1.0.0/foo/lib/x.rb, which is not trusted: owned by uid 1001, not root or uid 0 (owner uid 1001, mode 0644) (and 1 more); fix: chown -R root /m/foo/tags/1.0.0 && chmod -R go-w /m/foo/tags/1.0.0')
  const error = t.throws(() => assertNoTrustProblems([null, one]), {instanceOf: UntrustedPathError})
  t.is(error.exitCode, 77)
  t.is(error.message, one.message)
  t.deepEqual(assertNoTrustProblems([one, many, one], true), [one.message, many.message], '--allow-untrusted: each once, for the warning and the run record')
  // A name with a newline cannot forge a second line, and a path with a space is quoted in the fix.
  const odd = treeTrustProblem('/m/my app/tags/1.0.0', 'release my/tags/1.0.0', [{path: '/m/my app/tags/1.0.0/x\nlocalpuppet: ok', uid: 0, mode: 0o100666}], 0)!
  t.is(odd.message, `release my/tags/1.0.0 holds "/m/my app/tags/1.0.0/x\\nlocalpuppet: ok", which is not trusted: writable by group and others (owner uid 0, mode 0666); fix: chmod -R go-w '/m/my app/tags/1.0.0'`)
})

test('a release root at fault is offered a fix for its whole tree (what it holds is judged next)', async (t) => {
  const dir = await tempDir(t)
  const root = join(dir, 'foo', 'tags', '1.0.0')
  await mkdir(root, {recursive: true})
  await chmod(root, 0o777)
  t.regex(findTrustProblem(root, {what: 'release foo/tags/1.0.0', below: dir, tree: true})!.message, new RegExp(`fix: chmod -R go-w ${root}$`))
  t.regex(findTrustProblem(root, {what: 'state directory'})!.message, new RegExp(`fix: chmod go-w ${root}$`))
})

test('a path not there yet, to be made directly in a shared sticky directory (/tmp): the fix is to make it first, never to close /tmp', (t) => {
  const path = join('/tmp', `localpuppet-not-yet-${process.pid}-${Date.now()}`)
  t.is(findTrustProblem(path, {what: 'state directory'})!.message, `state directory ${path} does not exist, and would be made in /tmp, where others can make it first (owner uid 0, mode 1777); fix: mkdir -p ${path} first, or use a directory only root can write`)
})
