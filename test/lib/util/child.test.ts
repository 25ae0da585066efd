import {execFile, execFileSync} from 'node:child_process'
import {writeFile} from 'node:fs/promises'
import {join} from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'
import {fileURLToPath} from 'node:url'

import test from 'ava'

import {startChild} from '../../../src/lib/util/child.js'
import {tempDir} from '../../helpers/temp.js'

const CHILD = fileURLToPath(new URL('../../../src/lib/util/child.ts', import.meta.url))

/** Whether a process still runs (a zombie waiting for init counts as gone). */
function running(pid: number): boolean {
  try {
    process.kill(pid, 0)
  } catch {
    return false
  }

  try {
    return !execFileSync('ps', ['-o', 'stat=', '-p', String(pid)], {encoding: 'utf8'}).trim().startsWith('Z')
  } catch {
    return false
  }
}

test('a child that cannot start: spawnError, and exited still resolves', async (t) => {
  const exit = await startChild('/nonexistent/program', []).exited
  t.like(exit, {exitCode: null, signal: null, spawnError: {code: 'ENOENT'}})
})

test('environment: added, and removed for an undefined value; input is written to stdin', async (t) => {
  let out = ''
  process.env.LOCALPUPPET_TEST_REMOVED = 'present'
  const exit = await startChild('sh', ['-c', 'read line; echo "$line $ADDED ${LOCALPUPPET_TEST_REMOVED:-gone}"'], {
    env: {ADDED: 'added', LOCALPUPPET_TEST_REMOVED: undefined},
    input: 'hello\n',
    onStdout: (chunk) => (out += chunk),
  }).exited
  delete process.env.LOCALPUPPET_TEST_REMOVED
  t.is(exit.exitCode, 0)
  t.is(out, 'hello added gone\n')
})

for (const signal of ['SIGTERM', 'SIGHUP', 'SIGINT'] as const) {
  test(`localpuppet stopped by ${signal} stops the children it started (not in their own group) and dies of the signal`, async (t) => {
    const dir = await tempDir(t)
    const script = join(dir, 'parent.mts')
    await writeFile(script, `import {startChild} from ${JSON.stringify(CHILD)}\nconst child = startChild('sleep', ['300'])\nconsole.log(child.pid)\nsetInterval(() => {}, 1000)\n`)
    const parent = execFile('node', ['--import', 'tsx/esm', script], {cwd: fileURLToPath(new URL('../../..', import.meta.url))})
    const pid = await new Promise<number>((resolve) => parent.stdout!.once('data', (data) => resolve(Number(String(data).trim()))))
    t.true(running(pid))
    parent.kill(signal)
    const [, died] = await new Promise<[number | null, string | null]>((resolve) => parent.once('exit', (code, sig) => resolve([code, sig])))
    t.is(died, signal)
    for (let i = 0; i < 50 && running(pid); i++) await sleep(100)
    t.false(running(pid), `sleep ${pid} outlived localpuppet`)
  })
}
