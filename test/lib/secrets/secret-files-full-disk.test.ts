import {readdir} from 'node:fs/promises'
import {join} from 'node:path'

import test from 'ava'

import {IoError} from '../../../src/lib/errors.js'
import {writeSecretFiles} from '../../../src/lib/secrets/hiera-secrets.js'
import {ensureNodeKey} from '../../../src/lib/secrets/node-key.js'
import {Secret} from '../../../src/lib/util/secret.js'
import {smallFileSystem} from '../../helpers/full-disk.js'
import {tempDir} from '../../helpers/temp.js'

/*
 * A run's secrets (secrets.age) and its Hiera files (hiera.yaml, the backend's module) on a
 * full disk: 74 naming the run, and none of them left behind: a secrets.age cut short would
 * read as tampered to --replay, a hiera.yaml without its backend would be Puppet's error.
 */

test.serial("a full disk while a run's secrets and Hiera files are written: 74 in one line naming the run, nothing of them left in the run's directory", async (t) => {
  const state = join(await tempDir(t), 'state')
  await ensureNodeKey(state)
  const {mount: runDir, fill} = await smallFileSystem(t, 64)
  const secrets = {'db::password': new Secret('hunter2')}
  await fill()
  const error = await t.throwsAsync(writeSecretFiles(runDir, state, secrets, ['node', 'bin/run.js']), {instanceOf: IoError})
  t.is(error!.exitCode, 74)
  t.regex(error!.message, new RegExp(`^secrets of run ${runDir}: no space left on the device`))
  t.false(error!.message.includes('\n'))
  t.deepEqual(await readdir(runDir), ['filler'], 'no secrets.age, hiera.yaml or backend module left')
})
