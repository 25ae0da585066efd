import {execFileSync} from 'node:child_process'
import {createHash} from 'node:crypto'
import {mkdir, symlink, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import test from 'ava'

import {checkStoredCopy} from '../../../src/lib/repository/stored-copy.js'
import {tempDir} from '../../helpers/temp.js'

const BYTES = Buffer.from('app: foo/tags/1.0.0\n')
const LISTED = {size: BYTES.length, sha256: createHash('sha256').update(BYTES).digest('hex')}

test('a stored copy is intact only as the index lists it; missing, or changed (a byte, its size, a link, a directory, a FIFO: never followed or waited on)', async (t) => {
  const dir = await tempDir(t)
  const at = (name: string) => join(dir, name)
  await writeFile(at('intact'), BYTES)
  t.is(await checkStoredCopy(at('intact'), LISTED), 'intact')
  t.is(await checkStoredCopy(at('gone'), LISTED), 'missing')
  t.is(await checkStoredCopy(join(at('intact'), 'below'), LISTED), 'missing')

  const flipped = Buffer.from(BYTES)
  flipped[0] ^= 1
  await writeFile(at('flipped'), flipped)
  t.is(await checkStoredCopy(at('flipped'), LISTED), 'changed')
  await writeFile(at('longer'), Buffer.concat([BYTES, Buffer.from('\n')]))
  t.is(await checkStoredCopy(at('longer'), LISTED), 'changed')
  await symlink(at('intact'), at('link'))
  t.is(await checkStoredCopy(at('link'), LISTED), 'changed')
  await mkdir(at('dir'))
  t.is(await checkStoredCopy(at('dir'), LISTED), 'changed')
  execFileSync('mkfifo', [at('fifo')])
  t.is(await checkStoredCopy(at('fifo'), LISTED), 'changed')
})
