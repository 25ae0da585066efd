import {execFileSync} from 'node:child_process'
import {createHash, randomBytes} from 'node:crypto'
import {mkdir, symlink, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import test from 'ava'

import {FileChecker, stopCheckThread} from '../../../src/lib/tree/hash-files.js'
import {tempDir} from '../../helpers/temp.js'

const sha256 = (data: Buffer) => createHash('sha256').update(data).digest('hex')

for (const [how, expect] of [['on this thread', 1], ['on two threads', 10_000]] as const) {
  test(`${how}: each file's sha256, size and mode, links, FIFOs and directories not followed, a size that differs not read`, async (t) => {
    const dir = await tempDir(t)
    const paths: string[] = []
    const sizes: number[] = []
    const contents: Buffer[] = []
    for (let i = 0; i < 50; i++) {
      const content = randomBytes(i === 7 ? 3 * 1024 * 1024 : i * 101)
      const path = join(dir, `f${i}`)
      await writeFile(path, content, {mode: i % 2 ? 0o755 : 0o644})
      paths.push(path)
      sizes.push(content.length)
      contents.push(content)
    }

    await symlink(paths[0], join(dir, 'link'))
    execFileSync('mkfifo', [join(dir, 'fifo')])
    await mkdir(join(dir, 'dir'))
    paths.push(join(dir, 'link'), join(dir, 'fifo'), join(dir, 'dir'), join(dir, 'gone'), paths[3])
    sizes.push(0, 0, 0, 0, sizes[3] + 1)
    const checks = await new FileChecker(expect).check(paths, sizes)
    for (let i = 0; i < 50; i++) t.like(checks[i], {sha256: sha256(contents[i]), size: sizes[i], executable: i % 2 === 1, uid: process.geteuid!()}, `f${i}`)
    t.is(checks[1].mode! & 0o111, 0o111, 'the mode of the open file, for judging who may write it')
    t.is(checks[50].error, 'ELOOP')
    t.is(checks[51].error, 'ENOTFILE')
    t.is(checks[52].error, 'ENOTFILE')
    t.is(checks[53].error, 'ENOENT')
    t.like(checks[54], {sha256: null, size: sizes[3], executable: true})
  })
}

test('the same digests on one thread or two', async (t) => {
  const dir = await tempDir(t)
  const paths: string[] = []
  for (let i = 0; i < 450; i++) {
    paths.push(join(dir, `f${i}`))
    await writeFile(paths[i], `file ${i}\n`.repeat(i))
  }

  const digests = async (list: string[]) => (await new FileChecker(list.length).check(list)).map((check) => check.sha256)
  const two = await digests(paths)
  const one = await Promise.all(paths.slice(0, 10).map((path) => digests([path])))
  t.deepEqual(one.flat(), two.slice(0, 10))
  t.is(two[449], sha256(Buffer.from('file 449\n'.repeat(449))))
})

test('the second thread is shared: checks one after another, at once, and a list given before this thread joins', async (t) => {
  const dir = await tempDir(t)
  const lists: string[][] = [[], [], []]
  for (const [n, list] of lists.entries()) {
    for (let i = 0; i < 500; i++) {
      list.push(join(dir, `l${n}-f${i}`))
      await writeFile(list[i], `list ${n} file ${i}\n`)
    }
  }

  const expected = lists.map((list, n) => list.map((_, i) => sha256(Buffer.from(`list ${n} file ${i}\n`))))
  const digests = (checks: Array<{sha256: string | null}>) => checks.map((check) => check.sha256)
  t.deepEqual(digests(await new FileChecker(500).check(lists[0])), expected[0])
  t.deepEqual(digests(await new FileChecker(500).check(lists[1])), expected[1])
  const both = await Promise.all([new FileChecker(500).check(lists[1]), new FileChecker(500).check(lists[2])])
  t.deepEqual(both.map(digests), [expected[1], expected[2]])
  // Begun, then this thread busy elsewhere: the worker has checked files meanwhile.
  const pending = new FileChecker(500).begin(lists[2])
  const until = Date.now() + 200
  while (Date.now() < until) {
    // Busy, as verify is while it walks the tree.
  }

  t.deepEqual(digests(await pending.finish()), expected[2])
})

test('many lists at once on the shared thread: each gets its own results, with no listener warning; a stopped thread is replaced', async (t) => {
  const dir = await tempDir(t)
  const paths: string[] = []
  for (let i = 0; i < 450; i++) {
    paths.push(join(dir, `f${i}`))
    await writeFile(paths[i], `file ${i}\n`)
  }

  const warnings: string[] = []
  const onWarning = (warning: Error) => warnings.push(warning.name)
  process.on('warning', onWarning)
  try {
    const lists = Array.from({length: 12}, (_, n) => paths.slice(n, n + 420))
    const all = await Promise.all(lists.map((list) => new FileChecker(list.length).check(list)))
    for (const [n, checks] of all.entries()) t.deepEqual(checks.map((check) => check.sha256), lists[n].map((_, i) => sha256(Buffer.from(`file ${n + i}\n`))))
    stopCheckThread()
    const again = await new FileChecker(450).check(paths)
    t.is(again[449].sha256, sha256(Buffer.from('file 449\n')))
    await new Promise((resolve) => setImmediate(resolve))
  } finally {
    process.off('warning', onWarning)
  }

  t.deepEqual(warnings, [])
})
