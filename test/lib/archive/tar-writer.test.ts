import {execFileSync} from 'node:child_process'
import {closeSync} from 'node:fs'
import {mkdir, symlink, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import test from 'ava'

import {openReleaseFile} from '../../../src/lib/archive/tar-writer.js'
import {ReleaseError} from '../../../src/lib/errors.js'
import {tempDir} from '../../helpers/temp.js'

// What pack meets when a file changes between listing the tree and reading it.
test('a file that became a link, a FIFO or a directory, or is gone, is refused naming it; a file opens with its size and mode', async (t) => {
  const dir = await tempDir(t)
  await writeFile(join(dir, 'run.sh'), '#!/bin/sh\n', {mode: 0o755})
  await symlink('/etc/passwd', join(dir, 'link'))
  execFileSync('mkfifo', [join(dir, 'fifo')])
  await mkdir(join(dir, 'dir'))
  const opened = openReleaseFile(join(dir, 'run.sh'), 'app/run.sh')
  closeSync(opened.fd)
  t.like(opened, {size: 10, executable: true})
  const cases: Array<[string, RegExp]> = [
    ['link', /^app\/link: a symbolic link; a release may hold only regular files and directories$/],
    // Opened without waiting for a writer: this returns at once.
    ['fifo', /^app\/fifo: a FIFO; a release may hold only regular files and directories$/],
    ['dir', /^app\/dir: not a regular file; a release may hold only regular files and directories$/],
    ['gone', /gone: changed while packing; pack again$/],
  ]
  for (const [name, message] of cases) {
    const error = t.throws(() => openReleaseFile(join(dir, name), `app/${name}`))
    t.true(error instanceof ReleaseError, name)
    t.regex(error!.message, message)
  }
})
