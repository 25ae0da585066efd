import {chmod, mkdir, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import test from 'ava'

import {startChild} from '../../../src/lib/util/child.js'
import {findExecutable, securePath} from '../../../src/lib/util/find-executable.js'
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
