import {execFileSync} from 'node:child_process'
import {createHash, randomBytes} from 'node:crypto'
import {mkdir, symlink, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import test from 'ava'

import {type ReadAheadFile, readAhead} from '../../../src/lib/archive/read-ahead.js'
import {ReleaseError} from '../../../src/lib/errors.js'
import {tempDir} from '../../helpers/temp.js'

interface Read {
  size: number
  executable: boolean
  content: Buffer
  sha256: string
}

async function readAll(files: ReadAheadFile[], thread: boolean): Promise<Read[]> {
  const reader = readAhead(files, {thread})
  const out: Read[] = []
  try {
    for (const _ of files) {
      const {size, executable} = await reader.open()
      const pieces: Buffer[] = []
      let piece: Buffer | null
      while ((piece = await reader.piece()) !== null) pieces.push(Buffer.from(piece))
      out.push({size, executable, content: Buffer.concat(pieces), sha256: reader.digest()})
    }
  } finally {
    reader.close()
  }

  return out
}

for (const thread of [false, true]) {
  const how = thread ? 'on a second thread' : 'on this thread'
  test(`${how}: sizes, modes, contents and digests of files of every size, in order`, async (t) => {
    const dir = await tempDir(t)
    const sizes = [0, 1, 511, 512, 100_000, 1024 * 1024 - 1, 1024 * 1024, 3 * 1024 * 1024 + 7, ...Array.from({length: 300}, (_, i) => i * 37)]
    const files: ReadAheadFile[] = []
    const contents: Buffer[] = []
    for (const [i, size] of sizes.entries()) {
      const path = join(dir, `f${i}`)
      const content = randomBytes(size)
      await writeFile(path, content, {mode: i % 3 === 0 ? 0o755 : 0o644})
      files.push({path, label: `app/tags/1.0.0/f${i}`})
      contents.push(content)
    }

    const read = await readAll(files, thread)
    t.is(read.length, files.length)
    for (const [i, entry] of read.entries()) {
      t.is(entry.size, sizes[i])
      t.is(entry.executable, i % 3 === 0)
      t.true(entry.content.equals(contents[i]), `f${i}`)
      t.is(entry.sha256, createHash('sha256').update(contents[i]).digest('hex'))
    }
  })

  test(`${how}: a link, a FIFO or a file that is gone is refused, naming it`, async (t) => {
    const dir = await tempDir(t)
    await mkdir(join(dir, 'd'))
    await writeFile(join(dir, 'ok'), 'ok\n')
    await symlink('/etc/passwd', join(dir, 'link'))
    execFileSync('mkfifo', [join(dir, 'fifo')])
    const cases: Array<[string, RegExp]> = [
      ['link', /^app\/link: a symbolic link; a release may hold only regular files and directories$/],
      ['fifo', /^app\/fifo: a FIFO; a release may hold only regular files and directories$/],
      ['gone', /gone: changed while packing; pack again$/],
    ]
    for (const [name, message] of cases) {
      const files = [{path: join(dir, 'ok'), label: 'app/ok'}, {path: join(dir, name), label: `app/${name}`}]
      const error = await t.throwsAsync(readAll(files, thread))
      t.true(error instanceof ReleaseError, name)
      t.regex(error!.message, message)
    }
  })
}
