import {chmod, symlink, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import test from 'ava'

import {type LocalpuppetError, UntrustedPathError} from '../../../src/lib/errors.js'
import {readInputText} from '../../../src/lib/input/read-input.js'
import {openedFileTrustProblem} from '../../../src/lib/util/trusted-path.js'
import {tempDir} from '../../helpers/temp.js'

test('with trust, an input file others can write is refused (77) before it is read; allowed, it is named once, even through a link', async (t) => {
  const dir = await tempDir(t)
  const input = join(dir, 'input.yaml')
  await writeFile(input, 'app: foo/trunk\n')
  t.like(await readInputText(input, undefined, {allow: false}), {text: 'app: foo/trunk\n', source: input, untrusted: []})
  await chmod(input, 0o666)
  const error = await t.throwsAsync(readInputText(input, undefined, {allow: false}), {instanceOf: UntrustedPathError})
  t.is(error?.exitCode, 77)
  t.is(error?.message, `input file ${input} is not trusted: writable by group and others (owner uid ${process.geteuid!()}, mode 0666); fix: chmod go-w ${input}`)
  t.is((await readInputText(input, undefined, {allow: true})).untrusted.length, 1)
  const link = join(dir, 'link.yaml')
  await symlink(input, link)
  t.deepEqual((await readInputText(link, undefined, {allow: true})).untrusted, [error!.message])
  // Without trust (validate's static pass, a CI job's own files): read as it is.
  t.deepEqual((await readInputText(input)).untrusted, [])
})

test('the opened file is judged by its fstat too: a file swapped in after the path was judged is caught', (t) => {
  // What readBoundedFile's inspect hook gives: the owner and mode of the file actually open.
  const swapped = openedFileTrustProblem('/etc/localpuppet/input.yaml', {uid: 4242, mode: 0o100644, isDirectory: () => false}, 'input file', 0)
  t.is(swapped?.message, 'input file /etc/localpuppet/input.yaml is not trusted: owned by uid 4242, not root or uid 0 (owner uid 4242, mode 0644); fix: chown root /etc/localpuppet/input.yaml')
  t.is(openedFileTrustProblem('/etc/localpuppet/input.yaml', {uid: 0, mode: 0o100600, isDirectory: () => false}, 'input file', 0), null)
})

test("status's pointer is read as apply reads the input: a FIFO does not hang it, one others can write is no pointer", async (t) => {
  const {execFileSync} = await import('node:child_process')
  const {readPointer} = await import('../../../src/lib/input/pointer.js')
  const dir = await tempDir(t)
  const fifo = join(dir, 'fifo.yaml')
  execFileSync('mkfifo', [fifo])
  t.is(await readPointer(fifo), null)
  const input = join(dir, 'input.yaml')
  await writeFile(input, 'app: foo@^1.4\n')
  t.is(await readPointer(input), 'foo@^1.4')
  await chmod(input, 0o666)
  t.is(await readPointer(input), null)
  t.is(await readPointer('-'), null, 'never standard input')
})

test('an input path too long for the file system is 65 naming it, not an internal error', async (t) => {
  const error = await t.throwsAsync<LocalpuppetError>(readInputText('x'.repeat(300), undefined, {allow: false}))
  t.is(error?.exitCode, 65)
  t.regex(error?.message ?? '', /^input file x{189}\.\.\.: a name or path too long for the file system$/)
})
