import {chmod, mkdir, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import test from 'ava'

import {startChild} from '../../../src/lib/util/child.js'
import {DEFAULT_PATH, findExecutable, scriptInterpreter, securePath} from '../../../src/lib/util/find-executable.js'
import {tempDir} from '../../helpers/temp.js'

test('only absolute PATH entries count: an empty or relative one names whatever the current directory is', async (t) => {
  const dir = await tempDir(t)
  const bin = join(dir, 'bin')
  await mkdir(bin)
  for (const where of [dir, bin]) {
    await writeFile(join(where, 'tool'), '#!/bin/sh\necho "$0"\n')
    await chmod(join(where, 'tool'), 0o755)
  }

  const cwd = process.cwd()
  process.chdir(dir)
  t.teardown(() => process.chdir(cwd))
  t.is(findExecutable('tool', {PATH: `:.:bin:${bin}`}), join(bin, 'tool'))
  t.is(findExecutable('tool', {PATH: ':.:bin'}), null)
  t.is(securePath(`:/usr/bin:.:bin:${bin}:`), `/usr/bin:${bin}`)
  // An empty PATH is one empty entry, the current directory: nothing absolute left means the default.
  for (const path of ['', '.', ':']) t.is(securePath(path), DEFAULT_PATH)
  t.is(findExecutable('tool', {PATH: ''}), null)
  // A child started by a bare name, and what it looks up itself, never see the relative entries.
  let out = ''
  const child = startChild('tool', [], {cwd: dir, env: {PATH: `:${bin}`}, onStdout: (chunk) => (out += chunk)})
  t.is((await child.exited).exitCode, 0)
  t.is(out.trim(), join(bin, 'tool'))
  let path = ''
  const shell = startChild('/bin/sh', ['-c', 'echo "$PATH"'], {env: {PATH: `.:${bin}::/usr/bin`}, onStdout: (chunk) => (path += chunk)})
  await shell.exited
  t.is(path.trim(), `${bin}:/usr/bin`)
})

test("a script's interpreter, as its #! line finds it: a path, or env's lookup on PATH; null for a binary", async (t) => {
  const dir = await tempDir(t)
  await writeFile(join(dir, 'direct'), '#!/bin/sh -e\n')
  await writeFile(join(dir, 'env'), '#!/usr/bin/env sh\n')
  t.deepEqual(scriptInterpreter(join(dir, 'direct')), {path: '/bin/sh', args: ['-e']})
  t.is(scriptInterpreter(join(dir, 'env'), {PATH: '/usr/bin:/bin'})?.path, '/usr/bin/sh')
  t.is(scriptInterpreter(join(dir, 'env'), {PATH: ''})?.path, '/usr/bin/sh', 'the default PATH, not the current directory')
  t.is(scriptInterpreter('/usr/bin/env'), null)
})
