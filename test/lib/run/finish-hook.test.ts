import {readFile, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import test from 'ava'

import {runFinishHook} from '../../../src/lib/run/finish-hook.js'
import type {RunRecord} from '../../../src/lib/state/run-record.js'
import {processesWithEnv} from '../../../src/lib/util/process-tree.js'
import {tempDir} from '../../helpers/temp.js'
import {testNeeding} from '../../helpers/packages.js'

const hookToolsTest = await testNeeding(['jq', 'curl'])

async function setup(t: Parameters<typeof tempDir>[0]) {
  const dir = await tempDir(t)
  // A run id of its own per test: tests run at once, and each looks for what its hook left.
  const record = {id: `20261122T091631.123Z-${Math.random().toString(16).slice(2, 6).padEnd(4, '0')}`, state: 'succeeded'} as RunRecord
  const recordFile = join(dir, 'run.json')
  await writeFile(recordFile, JSON.stringify(record, null, 2) + '\n')
  const log = join(dir, 'puppet.log')
  await writeFile(log, '')
  return {dir, record, recordFile, log}
}

test('the hook reads the record from /dev/stdin: a real file, not a socket', async (t) => {
  const {dir, record, recordFile, log} = await setup(t)
  await runFinishHook(`jq -r .state /dev/stdin > ${dir}/state; cp /dev/stdin ${dir}/copy`, record, {log, recordFile})
  t.is(await readFile(join(dir, 'state'), 'utf8'), 'succeeded\n')
  t.deepEqual(JSON.parse(await readFile(join(dir, 'copy'), 'utf8')), record)
  t.regex(await readFile(log, 'utf8'), /on-finish hook ok/)
})

for (const background of ['setsid sleep 1000 &', 'sleep 1000 &', '(setsid sh -c "sleep 1000 & exit 0" &);']) {
  test(`a hook that leaves \`${background}\` behind returns at once, and what it left is stopped`, async (t) => {
    const {record, recordFile, log} = await setup(t)
    const started = Date.now()
    // A minute's timeout, as by default: returning at all before it proves the hook did not wait.
    await runFinishHook(`${background} echo started`, record, {log, recordFile, timeoutMs: 60_000})
    t.true(Date.now() - started < 50_000, 'did not wait for the background process')
    t.regex(await readFile(log, 'utf8'), /on-finish hook ok.*\non-finish: started/)
    // Nothing of ours still runs `sleep 1000`.
    const {readdirSync, readFileSync} = await import('node:fs')
    const sleepers = readdirSync('/proc').filter((pid) => {
      try {
        return /^\d+$/.test(pid) && readFileSync(`/proc/${pid}/cmdline`, 'utf8') === 'sleep\u00001000\u0000' && readFileSync(`/proc/${pid}/environ`, 'utf8').includes('LOCALPUPPET_RUN_ID=' + record.id)
      } catch {
        return false
      }
    })
    t.deepEqual(sleepers, [])
  })
}

test('a hook that runs past its time is stopped with everything it started', async (t) => {
  const {record, recordFile, log} = await setup(t)
  await runFinishHook('setsid sleep 1000 & sleep 1000', record, {log, recordFile, timeoutMs: 500})
  t.regex(await readFile(log, 'utf8'), /on-finish hook stopped after 0.5s/)
  t.deepEqual(processesWithEnv(`LOCALPUPPET_RUN_ID=${record.id}`).length, 0)
})

test('huge output is capped in the log, and memory stays small', async (t) => {
  const {record, recordFile, log} = await setup(t)
  const before = process.memoryUsage().rss
  await runFinishHook('head -c 200000000 /dev/zero | tr "\\0" x; exit 0', record, {log, recordFile})
  const text = await readFile(log, 'utf8')
  t.true(text.length < 100_000, `log is ${text.length} bytes`)
  t.regex(text, /on-finish hook ok/)
  t.regex(text, /\d+ more bytes of output dropped/)
  t.true(process.memoryUsage().rss - before < 100 * 1024 * 1024)
})

test('aborting (SIGTERM to apply) stops the hook at once', async (t) => {
  const {record, recordFile, log} = await setup(t)
  const controller = new AbortController()
  setTimeout(() => controller.abort('SIGTERM'), 300)
  await runFinishHook('sleep 1000', record, {log, recordFile, signal: controller.signal})
  t.regex(await readFile(log, 'utf8'), /on-finish hook stopped by SIGTERM/)
})

/** awk doubling a string until it holds `mib` MiB, then saying so: it needs about twice that at its peak. */
const allocate = (mib: number) => `awk 'BEGIN { s = "x"; while (length(s) < ${mib} * 1024 * 1024) s = s s; print "allocated" }'`

test("a hook's memory is bounded: one that allocates too much is stopped, and its failure goes to the log", async (t) => {
  const {record, recordFile, log} = await setup(t)
  await runFinishHook(allocate(512), record, {log, recordFile, memoryBytes: 128 * 1024 * 1024})
  const text = await readFile(log, 'utf8')
  t.regex(text, /on-finish hook failed \(exit \d+\)/)
  t.regex(text, /out of memory/)
  t.notRegex(text, /^on-finish: allocated/m)
})

hookToolsTest('the default memory bound lets ordinary hooks run: sh, jq, curl, ruby, and a modest allocation', async (t) => {
  const {record, recordFile, log} = await setup(t)
  await runFinishHook(`jq -r .state /dev/stdin && curl --version >/dev/null && ruby -e 'puts "ruby ok"' && ${allocate(64)} && ulimit -v`, record, {log, recordFile})
  const text = await readFile(log, 'utf8')
  t.regex(text, /on-finish hook ok/)
  t.regex(text, /on-finish: succeeded\non-finish: ruby ok\non-finish: allocated\non-finish: 1048576\n/)
})
