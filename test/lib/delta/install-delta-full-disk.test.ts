import {readdir, rm} from 'node:fs/promises'
import {join} from 'node:path'

import test from 'ava'

import {verifyInstalled} from '../../../src/lib/verify/verify-installed.js'
import {cli} from '../../helpers/cli.js'
import {DELTA, deltaSetup, fetchTag} from '../../helpers/delta.js'
import {fillLeaving, smallFileSystem} from '../../helpers/full-disk.js'
import {exists} from '../../helpers/temp.js'

/*
 * An incremental install (objects beside an installed tag) onto a full disk: 74 in one
 * line naming the module directory, the new tag absent, the installed one intact, no
 * staging left; the next fetch with room installs it.
 */

test.serial('fetch from objects onto a full module directory: 74 naming it, the new tag absent and the old one whole, no staging left; with room the next fetch installs it', async (t) => {
  const setup = await deltaSetup(t, {perModule: 150, rewritten: 10})
  const {mount, fill} = await smallFileSystem(t, 4096)
  const s = {...setup, moduleDir: mount}
  t.is((await fetchTag(s, DELTA.OLD)).releases[0].delivery, 'archive')
  const args = ['fetch', DELTA.NEW, '--source', s.repo, '--module-dir', s.moduleDir]
  const intact = async (label: string) => {
    t.false(await exists(join(mount, DELTA.NEW)), label)
    t.deepEqual((await verifyInstalled(s.moduleDir, [DELTA.OLD])).results.map((r) => r.ok), [true], label)
    t.deepEqual((await readdir(join(mount, '.localpuppet'))).filter((name) => name === 'staging' || /\.tmp$|\.lock\./.test(name)), [], `${label}: no staging, no temporary file`)
  }

  // Full to the last byte: the first file written is the module directory's lock, named.
  await fill()
  const full = await cli(args)
  t.is(full.exitCode, 74, full.stderr)
  t.regex(full.stderr, new RegExp(`^localpuppet: lock ${mount}/\\.localpuppet/\\S+: no space left on the device\n  hint: free space on that file system and try again$`))
  await intact('full')

  // Room for the locks and the index, not for the files 1.0.1 changed.
  await rm(join(mount, 'filler'))
  await fillLeaving(mount, 32)
  const nearly = await cli(args)
  t.is(nearly.exitCode, 74, nearly.stderr)
  t.regex(nearly.stderr, new RegExp(`^localpuppet: installing into ${mount}: no space left on the device\n  hint: free space on that file system and try again$`))
  await intact('nearly full')

  await rm(join(mount, 'filler2'))
  const again = await cli([...args, '--json'])
  t.is(again.exitCode, 0, again.stderr)
  t.is(JSON.parse(again.stdout).releases[0].delivery, 'objects')
})
