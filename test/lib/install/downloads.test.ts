import {mkdir, readdir, writeFile} from 'node:fs/promises'

import test from 'ava'

import {downloadPath, downloadsDir, removeAbandonedDownloads} from '../../../src/lib/install/downloads.js'
import {processStartTime} from '../../../src/lib/util/process.js'
import {tempDir} from '../../helpers/temp.js'

test("only downloads whose process is provably gone are removed: a dead pid, or a live pid started at another time (reused); this process's own, a live one's of unknown start, and other names stay", async (t) => {
  const modules = await tempDir(t)
  const dir = downloadsDir(modules)
  await mkdir(dir, {recursive: true})
  const own = downloadPath(dir).slice(dir.length + 1)
  const start = processStartTime(process.pid)!
  t.regex(own, new RegExp(`^${process.pid}-${start}-[0-9a-f]{8}\\.tar\\.gz$`))
  // A pid above the kernel's maximum (4194304) is never a live process.
  const dead = 4_194_999
  const names = {
    own,
    reused: `${process.pid}-${Number(start) + 1}-00000001.tar.gz`,
    dead: `${dead}-123-00000002.tar.gz`,
    deadOld: `${dead}-00000003.tar.gz`,
    liveOld: `${process.pid}-00000004.tar.gz`,
    other: 'notes.txt',
  }
  for (const name of Object.values(names)) await writeFile(`${dir}/${name}`, 'x')
  t.deepEqual((await removeAbandonedDownloads(modules)).sort(), [names.reused, names.dead, names.deadOld].sort())
  t.deepEqual((await readdir(dir)).sort(), [names.own, names.liveOld, names.other].sort())
})

test('a module directory with no downloads: nothing to do, nothing made', async (t) => {
  const modules = await tempDir(t)
  t.deepEqual(await removeAbandonedDownloads(modules), [])
  t.deepEqual(await readdir(modules), [])
})
