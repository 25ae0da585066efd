import {chmod, mkdir, mkdtemp, readdir, readFile, rm, writeFile} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'

import type {ExecutionContext} from 'ava'
import test from 'ava'

import {clearConfigCache} from '../../../src/lib/config/settings.js'
import {IoError} from '../../../src/lib/errors.js'
import {sendRunToPuppetDb} from '../../../src/lib/puppetdb/after-run.js'
import {PuppetDbClient} from '../../../src/lib/puppetdb/client.js'
import {flushSpool, spoolCommands, spoolDir} from '../../../src/lib/puppetdb/spool.js'
import {newRunRecord} from '../../../src/lib/state/run-record.js'
import {smallFileSystem} from '../../helpers/full-disk.js'

/*
 * What an attempt does with PuppetDB at its end: never throws, never fails the attempt; what
 * could not be sent is spooled, and a refused attempt is a failed report carrying why.
 */

/** The puppetdb setting (unreachable) and node web1 for this test, from the environment. */
function unreachablePuppetDb(t: ExecutionContext): void {
  const saved = {...process.env}
  t.teardown(() => {
    process.env = saved
    clearConfigCache()
  })
  process.env.LOCALPUPPET_CONFIG = ''
  process.env.LOCALPUPPET_PUPPETDB = 'http://127.0.0.1:1'
  process.env.LOCALPUPPET_NODE_NAME = 'web1'
  clearConfigCache()
}

/** A state dir, PuppetDB unreachable, and an attempt refused before Puppet ran. */
async function refusedAttempt(t: ExecutionContext) {
  const state = await mkdtemp(join(tmpdir(), 'lp-after-run-'))
  t.teardown(() => rm(state, {recursive: true, force: true}))
  unreachablePuppetDb(t)
  const record = {
    ...newRunRecord('20261128T004000Z-ab12', join(state, 'runs', 'x', 'puppet.log'), new Date('2026-11-28T00:40:00Z'), {ref: 'foo/channels/stable'}),
    state: 'refused' as const,
    finishedAt: '2026-11-28T00:40:01.000Z',
    error: 'input.yaml: app: no tag of foo fits ^9',
  }
  return {state, record}
}

test.serial('an attempt refused while PuppetDB is unreachable: a warning, and its failed report spooled with the refusal', async (t) => {
  const {state, record} = await refusedAttempt(t)
  const warning = await sendRunToPuppetDb(state, join(state, 'modules'), record)
  t.regex(warning ?? '', /^puppetdb: 1 command\(s\) spooled for later \(localpuppet report flush\): puppetdb http:\/\/127\.0\.0\.1:1\/?: store report: /)
  const files = (await readdir(spoolDir(state))).filter((name) => name.endsWith('.json'))
  t.is(files.length, 1)
  const spooled = JSON.parse(await readFile(join(spoolDir(state), files[0]), 'utf8')) as {command: string; certname: string; payload: {status: string; code_id: string; job_id: string; logs: Array<{level: string; message: string}>}}
  t.like(spooled, {command: 'store report', certname: 'web1', payload: {status: 'failed', code_id: 'foo/channels/stable', job_id: record.id}})
  t.deepEqual(spooled.payload.logs.map((log) => [log.level, log.message]), [['err', 'input.yaml: app: no tag of foo fits ^9']])
  // Skipped and busy attempts are not the node's runs: nothing is sent for them.
  t.is(await sendRunToPuppetDb(state, join(state, 'modules'), {...record, id: '20261128T004100Z-ab12', state: 'skipped'}), null)
  t.is((await readdir(spoolDir(state))).filter((name) => name.endsWith('.json')).length, 1)
})

test.serial("a run's catalog reaches the spool without what Puppet marked Sensitive, and Puppet's cache of it (secrets in clear) is not kept", async (t) => {
  const state = await mkdtemp(join(tmpdir(), 'lp-after-run-'))
  t.teardown(() => rm(state, {recursive: true, force: true}))
  unreachablePuppetDb(t)
  const id = '20261128T005500Z-cd34'
  const cache = join(state, 'runs', id, 'client_data')
  await mkdir(join(cache, 'catalog'), {recursive: true})
  await writeFile(
    join(cache, 'catalog', 'vm.json'),
    JSON.stringify({name: 'vm', version: 1, resources: [{type: 'User', title: 'bob', tags: ['user'], parameters: {password: 'pw123', shell: '/bin/sh'}, sensitive_parameters: ['password']}], edges: []}),
  )
  const record = {...newRunRecord(id, join(state, 'runs', id, 'puppet.log'), new Date(), {release: 'foo/tags/1.4.0'}), state: 'succeeded' as const, finishedAt: new Date().toISOString()}
  await sendRunToPuppetDb(state, join(state, 'modules'), record)
  const texts = await Promise.all((await readdir(spoolDir(state))).filter((name) => name.endsWith('.json')).map((name) => readFile(join(spoolDir(state), name), 'utf8')))
  t.true(texts.some((text) => text.includes('"replace catalog"') && text.includes('/bin/sh')))
  t.false(texts.some((text) => text.includes('pw123')))
  await t.throwsAsync(readdir(cache), {code: 'ENOENT'})
})

test.serial("a run that finds the spool's flush lock taken says so (a lock of a process gone whose pid was reused held every run's report back without a word); a lock whose holder started at another time is not believed", async (t) => {
  const {state, record} = await refusedAttempt(t)
  await mkdir(spoolDir(state), {recursive: true, mode: 0o700})
  // Written as a flush of an older localpuppet wrote it: a live pid, no start time.
  await writeFile(join(spoolDir(state), 'flush.lock'), `${process.pid}\n`)
  t.regex((await sendRunToPuppetDb(state, join(state, 'modules'), record)) ?? '', new RegExp(`^puppetdb: 1 command\\(s\\) spooled for later: another flush \\(pid ${process.pid}\\) is sending; if no localpuppet runs as pid ${process.pid}, remove .*flush\\.lock`))
  // This pid, but a process that started at another time: not the holder.
  await writeFile(join(spoolDir(state), 'flush.lock'), `${process.pid} 1\n`)
  t.regex((await sendRunToPuppetDb(state, join(state, 'modules'), {...record, id: '20261128T004100Z-ab12'})) ?? '', /store report: /)
})

test.serial("Puppet's catalog cache (secrets in clear) is removed even when the run's commands cannot be spooled (a spool others can write, a full disk)", async (t) => {
  const {state, record} = await refusedAttempt(t)
  const cache = join(state, 'runs', record.id, 'client_data')
  await mkdir(join(cache, 'catalog'), {recursive: true})
  await writeFile(join(cache, 'catalog', 'vm.json'), JSON.stringify({name: 'vm', version: 1, resources: [{type: 'User', title: 'bob', parameters: {password: 'pw123'}, sensitive_parameters: ['password']}], edges: []}))
  await mkdir(spoolDir(state), {recursive: true})
  await chmod(spoolDir(state), 0o777)
  t.regex((await sendRunToPuppetDb(state, join(state, 'modules'), record)) ?? '', /^puppetdb: this run's report was not spooled: .*puppetdb-spool/)
  await t.throwsAsync(readdir(cache), {code: 'ENOENT'})
})

// A full disk while a run's commands are spooled: the run's result stands (nothing thrown),
// its report is said lost in one line of our own, and the spool is as it was: no temporary
// file, no half of this run's commands, the facts spooled before not removed.
test.serial("a full disk while spooling: the run's report is said lost in one clear line, nothing of it is left in the spool, and what was spooled before (facts included) is intact", async (t) => {
  const {mount: state, fill} = await smallFileSystem(t, 256)
  unreachablePuppetDb(t)
  // An earlier run's facts and report, spooled while PuppetDB was away.
  await spoolCommands(state, [
    {command: 'replace facts', version: 5, certname: 'web1', producerTimestamp: '2026-11-28T00:00:00.000Z', payload: {values: {old: true}}},
    {command: 'store report', version: 8, certname: 'web1', producerTimestamp: '2026-11-28T00:00:01.000Z', payload: {n: 1}},
  ])
  const before = await readdir(spoolDir(state))
  const texts = await Promise.all(before.map((name) => readFile(join(spoolDir(state), name), 'utf8')))
  // This run left facts (Puppet's cache) and then the disk filled up.
  const id = '20261128T010000Z-ef56'
  await mkdir(join(state, 'runs', id, 'client_data', 'facts'), {recursive: true})
  await writeFile(join(state, 'runs', id, 'client_data', 'facts', 'web1.json'), JSON.stringify({name: 'web1', values: {new: 'x'.repeat(2048)}}))
  await fill()
  const record = {...newRunRecord(id, join(state, 'runs', id, 'puppet.log'), new Date('2026-11-28T01:00:00Z'), {release: 'foo/tags/1.4.0'}), state: 'succeeded' as const, finishedAt: '2026-11-28T01:00:05.000Z'}

  const warning = await sendRunToPuppetDb(state, join(state, 'modules'), record)
  t.regex(warning ?? '', /^puppetdb: this run's report was not spooled, it is lost \(PuppetDB will not have it\): PuppetDB spool: no space left on the device( \(.*\))?; what was spooled before is kept$/)
  t.false((warning ?? '').includes('ENOSPC'), 'our words, not Node\'s')
  t.deepEqual(await readdir(spoolDir(state)), before, 'no temporary file, none of this run\'s commands')
  t.deepEqual(await Promise.all(before.map((name) => readFile(join(spoolDir(state), name), 'utf8'))), texts, 'the earlier facts and report intact')
})

test.serial('report flush on a full disk: 74 naming the spool lock, no empty lock left behind (the next flush is not held back), the spooled commands intact', async (t) => {
  const {mount: state, fill} = await smallFileSystem(t, 64)
  await spoolCommands(state, [{command: 'store report', version: 8, certname: 'web1', producerTimestamp: '2026-11-28T00:00:01.000Z', payload: {n: 1}}])
  const before = await readdir(spoolDir(state))
  await fill()
  const client = new PuppetDbClient({url: 'http://127.0.0.1:1', ca: null, cert: null, key: null})
  const error = await t.throwsAsync(flushSpool(state, client, {deadlineMs: 1000, timeoutMs: 500}), {instanceOf: IoError})
  t.is(error!.exitCode, 74)
  t.is(error!.message, `PuppetDB spool lock ${join(spoolDir(state), 'flush.lock')}: no space left on the device`)
  t.deepEqual(await readdir(spoolDir(state)), before)
})
