import {chmod, readFile, readdir, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import test, {type ExecutionContext} from 'ava'
import {execa} from 'execa'

import {cli} from '../helpers/cli.js'
import {sharedDemoRepository} from '../helpers/repository.js'
import {recordedRollout} from '../helpers/rollout-record.js'
import {exists, tempDir} from '../helpers/temp.js'

// Each test starts the CLI several times: one at a time, so that a loaded machine still sees progress.
// Issue 32: REF is judged before any node is touched. A fake mco notes every call: none
// must be made for a REF that is a typo or that the configured source does not hold.

let shared: Awaited<ReturnType<typeof sharedDemoRepository>>
test.before(async () => {
  shared = await sharedDemoRepository('localpuppet-rollout-ref-')
})
test.after.always(async () => shared?.remove())

/** A state dir, a module dir and a fake mco that records that it was called and finds no node. */
async function operator(t: ExecutionContext) {
  const dir = await tempDir(t)
  const mco = join(dir, 'mco')
  const calls = join(dir, 'mco-calls')
  await writeFile(mco, `#!/bin/sh\necho "$@" >> ${calls}\necho '[]'\n`)
  await chmod(mco, 0o755)
  const state = join(dir, 'state')
  const env = {LOCALPUPPET_MODULE_DIR: join(dir, 'modules'), LOCALPUPPET_SOURCE: undefined, LOCALPUPPET_TRUST: undefined, LOCALPUPPET_CONFIG: undefined}
  const run = (args: string[], extraEnv: Record<string, string> = {}) => cli(['rollout', ...args, '--mco', mco, '--state-dir', state], {env: {...env, ...extraEnv}})
  const touched = async () => ({mco: await exists(calls), records: (await readdir(join(state, 'rollouts')).catch(() => [])).length})
  return {run, touched}
}

for (const [typo, command] of [['lst', 'list'], ['shwo', 'show'], ['lits', 'list']] as const) {
  test.serial(`rollout ${typo}: 64 with "did you mean localpuppet rollout ${command}", no node asked, nothing recorded`, async (t) => {
    const {run, touched} = await operator(t)
    const result = await run([typo, '-W', 'role=web'])
    t.is(result.exitCode, 64, result.stderr)
    const lines = result.stderr.trimEnd().split('\n')
    t.is(lines.length, 1, result.stderr)
    t.regex(lines[0], new RegExp(`"${typo}" is not a release reference \\(did you mean localpuppet rollout ${command}\\?\\)`))
    t.deepEqual(await touched(), {mco: false, records: 0})
  })
}

test.serial('a REF that is no release reference and no typo of a command: 64 with the forms a REF takes; --json says it as JSON', async (t) => {
  const {run, touched} = await operator(t)
  const result = await run(['foo/tag/1.5.0', '--json'])
  t.is(result.exitCode, 64, result.stderr)
  const error = JSON.parse(result.stdout)
  t.regex(error.error?.message ?? error.message, /"foo\/tag\/1\.5\.0" is not a release reference/)
  t.deepEqual(await touched(), {mco: false, records: 0})
})

test.serial('a REF the configured source does not hold: 66 once, from the client, naming the source; no node asked', async (t) => {
  const {run, touched} = await operator(t)
  const missing = await run(['foo/tags/9.9.9', '--source', shared.repo, '--trust', shared.pub])
  t.is(missing.exitCode, 66, missing.stderr)
  t.regex(missing.stderr, new RegExp(`REF foo/tags/9\\.9\\.9: not in the repository's index \\(source ${shared.repo}\\): no node was asked`))
  const noApp = await run(['bar@^1'], {LOCALPUPPET_SOURCE: shared.repo, LOCALPUPPET_TRUST: shared.pub})
  t.is(noApp.exitCode, 66, noApp.stderr)
  t.regex(noApp.stderr, /the repository has no app bar/)
  t.deepEqual(await touched(), {mco: false, records: 0})
})

test.serial('a REF the source holds (a tag, a range) goes on to the fleet; with no source configured only its syntax is checked', async (t) => {
  for (const [ref, source] of [['foo/tags/1.4.0', shared.repo], ['foo@^1.3', shared.repo], ['foo/tags/9.9.9', null]] as const) {
    const {run, touched} = await operator(t)
    const result = await run([ref, ...(source ? ['--source', source, '--trust', shared.pub] : [])])
    // The fake mco finds no node: the rollout got as far as asking the fleet.
    t.is(result.exitCode, 1, `${ref}: ${result.stderr}`)
    t.regex(result.stderr, /no nodes matched the discovery filters/, ref)
    t.is((await touched()).mco, true, ref)
  }
})

test.serial('the source is read as a node reads it, and nothing is written: an index signed by a key not trusted is 65', async (t) => {
  const {run, touched} = await operator(t)
  const dir = await tempDir(t)
  const other = join(dir, 'other.pub.pem')
  const {generateKeyPairSync} = await import('node:crypto')
  await writeFile(other, generateKeyPairSync('ed25519').publicKey.export({type: 'spki', format: 'pem'}))
  const result = await run(['foo/tags/1.4.0', '--source', shared.repo, '--trust', other])
  t.is(result.exitCode, 65, result.stderr)
  t.deepEqual(await touched(), {mco: false, records: 0})
})

// Issue 32, 5: one meaning of "applied" everywhere, fleet status's: the release of the
// node's newest run that succeeded without --noop. Nodes a (succeeds), b (fails) and c
// (never started), all on app/tags/1.0.0 before a rollout of app/tags/1.1.0.

/** `rollout show ID --json` and its table, of a rollout recorded with these flags. */
async function shown(t: ExecutionContext, flags: Parameters<typeof recordedRollout>[2]) {
  const state = await tempDir(t)
  const {store} = await recordedRollout(state, 'done', flags)
  const json = await cli(['rollout', 'show', store.record.id, '--state-dir', state, '--json'])
  const text = await cli(['rollout', 'show', store.record.id, '--state-dir', state])
  const applied = Object.fromEntries((JSON.parse(json.stdout).nodes as Array<{node: string; applied: string | null}>).map((node) => [node.node, node.applied]))
  // The APPLIED column of each node's line.
  const column = Object.fromEntries(text.stdout.split('\n').filter((line) => /^[abc] /.test(line)).map((line) => [line[0], line.split(/\s{2,}/)[3]]))
  return {applied, column, json: JSON.parse(json.stdout)}
}

test.serial('a --noop rollout applied nothing: applied stays what each node had, in the JSON and the table', async (t) => {
  const {applied, column} = await shown(t, {noop: true, 'max-failures': '5'})
  t.deepEqual(applied, {a: 'app/tags/1.0.0', b: 'app/tags/1.0.0', c: 'app/tags/1.0.0'})
  t.deepEqual(column, {a: 'app/tags/1.0.0', b: 'app/tags/1.0.0', c: 'app/tags/1.0.0'})
})

test.serial('a failed run leaves applied where it was; a node reverted is on what the revert applied; one never started keeps its own', async (t) => {
  const failed = await shown(t, {revert: 'none'})
  t.deepEqual(failed.applied, {a: 'app/tags/1.1.0', b: 'app/tags/1.0.0', c: 'app/tags/1.0.0'})
  t.deepEqual(failed.column, failed.applied, 'the table says the same')
  const reverted = await shown(t, {revert: 'all'})
  t.like(reverted.json.nodes[1], {node: 'b', state: 'failed', release: 'app/tags/1.1.0', revert: {state: 'succeeded'}})
  t.deepEqual(reverted.applied, {a: 'app/tags/1.0.0', b: 'app/tags/1.0.0', c: 'app/tags/1.0.0'}, '--revert all put a back too')
  t.deepEqual(reverted.column, reverted.applied)
})

// Issue 32, 6: a rollout whose process is gone is interrupted, not running.

test.serial('rollout list and show: a rollout recorded as running whose process was SIGKILLed is interrupted and can be resumed', async (t) => {
  const state = await tempDir(t)
  const {store} = await recordedRollout(state, 'interrupted')
  const gone = await execa('sh', ['-c', 'echo $$'])
  const record = JSON.parse(await readFile(store.path, 'utf8'))
  await writeFile(store.path, JSON.stringify({...record, status: 'running', interruption: null, exitCode: null, pid: Number(gone.stdout), pidStart: '1'}), {mode: 0o600})
  const list = await cli(['rollout', 'list', '--state-dir', state])
  t.is(list.exitCode, 0, list.stderr)
  t.regex(list.stdout, new RegExp(`^${store.record.id}\\s+interrupted\\s`, 'm'))
  t.regex(list.stdout, new RegExp(`Interrupted \\(its process ${gone.stdout} ended without finishing it: killed[^)]*\\): localpuppet rollout --resume ${store.record.id} continues it`))
  const json = await cli(['rollout', 'list', '--state-dir', state, '--json'])
  t.like(JSON.parse(json.stdout)[0], {id: store.record.id, status: 'interrupted'})
  const show = await cli(['rollout', 'show', store.record.id, '--state-dir', state])
  t.is(show.exitCode, 75)
  t.regex(show.stdout, new RegExp(`Resume it: localpuppet rollout --resume ${store.record.id}`))
  // A pid reused by another process (its start time differs) is not the rollout's either.
  await writeFile(store.path, JSON.stringify({...record, status: 'running', pid: process.pid, pidStart: '1'}), {mode: 0o600})
  t.like(JSON.parse((await cli(['rollout', 'list', '--state-dir', state, '--json'])).stdout)[0], {status: 'interrupted'})
  t.is(JSON.parse(await readFile(store.path, 'utf8')).status, 'running', 'reading it rewrote nothing')
})

// Outside text in the rollout's tables: shown escaped, one line per value; --json exact.

test.serial("rollout show and list: a node's message, release and the rollout's REF with escape sequences and newlines are shown escaped on one line; --json keeps them exact", async (t) => {
  const state = await tempDir(t)
  const {store} = await recordedRollout(state, 'interrupted')
  const record = JSON.parse(await readFile(store.path, 'utf8'))
  const evil = 'Error: \u001B]0;owned\u0007boom\u202Eevil'
  record.state.nodes[1].message = evil
  record.state.nodes[2].before = 'app/tags/1.0.0\u001B[2J'
  record.settings.ref = 'app/tags/1.1.0\u001B[31m'
  record.interruption = 'mco said\nFORGED: line'
  await writeFile(store.path, JSON.stringify(record), {mode: 0o600})
  for (const args of [['show', store.record.id], ['list']]) {
    const text = await cli(['rollout', ...args, '--state-dir', state])
    t.false(/[\u001B\u0007\u202E]/.test(text.stdout), `${args[0]}: no raw control or bidi character: ${JSON.stringify(text.stdout)}`)
    t.false(/^FORGED/m.test(text.stdout), `${args[0]}: no line of its own`)
    t.regex(text.stdout, /app\/tags\/1\.1\.0\\e\[31m/, args[0])
  }

  const text = await cli(['rollout', 'show', store.record.id, '--state-dir', state])
  t.regex(text.stdout, /Error: \\e\]0;owned\\u0007boom\\u202eevil/)
  t.regex(text.stdout, /app\/tags\/1\.0\.0\\e\[2J/)
  t.regex(text.stdout, /mco said\\nFORGED: line/)
  const json = JSON.parse((await cli(['rollout', 'show', store.record.id, '--state-dir', state, '--json'])).stdout)
  t.is(json.nodes[1].message, evil)
  t.is(json.ref, record.settings.ref)
  t.is(json.interruption, record.interruption)
})

// Issue 32: rollout revert ID puts back what a rollout changed, over a fake mco that keeps
// each node's applied release and answers status, rollback and the polls of its runs.

const FAKE_FLEET_MCO = `#!/usr/bin/env node
const fs = require('fs')
const path = require('path')
const argv = process.argv.slice(2)
const here = __dirname
const nodes = fs.readFileSync(argv[argv.indexOf('--nodes') + 1], 'utf8').trim().split('\\n')
const at = argv.indexOf('localpuppet')
const action = argv[at + 1]
const args = Object.fromEntries(argv.slice(at + 2).map((arg) => [arg.slice(0, arg.indexOf('=')), arg.slice(arg.indexOf('=') + 1)]))
fs.appendFileSync(path.join(here, 'calls'), JSON.stringify({action, nodes, args}) + '\\n')
const file = path.join(here, 'fleet.json')
const fleet = JSON.parse(fs.readFileSync(file, 'utf8'))
const replies = nodes.map((node, i) => {
  const state = fleet[node]
  const ok = (data) => ({sender: node, statuscode: 0, statusmsg: 'OK', data})
  if (action === 'rollback' && fs.existsSync(path.join(here, 'fail-once'))) {
    fs.unlinkSync(path.join(here, 'fail-once'))
    console.error('error 2026/11/27: Could not connect to the middleware')
    process.exit(1)
  }
  if (action === 'rollback') {
    state.run = {id: '20261127T120000.000Z-' + (4096 + Object.keys(fleet).indexOf(node) * 16 + (state.runs = (state.runs || 0) + 1)).toString(16), release: args.to}
    return ok({run_id: state.run.id, state: 'running', release: args.to, started_at: new Date().toISOString()})
  }
  if (args.runs) {
    state.applied = state.run.release
    return ok({run_id: state.run.id, state: 'succeeded', release: state.run.release, noop: false, exit_code: 0, duration_ms: 1000})
  }
  return ok({pointer: state.applied, applied: state.applied})
})
fs.writeFileSync(file, JSON.stringify(fleet))
console.log(JSON.stringify(replies))
`

/** A rollout recorded with these flags, and a fake fleet whose nodes are where the rollout left them. */
async function revertable(t: ExecutionContext, flags: Parameters<typeof recordedRollout>[2]) {
  const state = await tempDir(t)
  const bin = await tempDir(t)
  const {store} = await recordedRollout(state, 'done', flags)
  const applied = JSON.parse((await cli(['rollout', 'show', store.record.id, '--state-dir', state, '--json'])).stdout).nodes
  await writeFile(join(bin, 'fleet.json'), JSON.stringify(Object.fromEntries(applied.map((node: {node: string; applied: string}) => [node.node, {applied: node.applied}]))))
  await writeFile(join(bin, 'mco'), FAKE_FLEET_MCO, {mode: 0o755})
  const env = {PATH: `${bin}:${process.env.PATH}`}
  const revert = (args: string[] = []) => cli(['rollout', 'revert', store.record.id, '--state-dir', state, ...args], {env})
  const calls = async () => ((await exists(join(bin, 'calls'))) ? (await readFile(join(bin, 'calls'), 'utf8')).trim().split('\n').map((line) => JSON.parse(line)) : [])
  return {state, bin, env, id: store.record.id, revert, calls, fleet: async () => JSON.parse(await readFile(join(bin, 'fleet.json'), 'utf8'))}
}

test.serial('rollout revert ID: the nodes the rollout moved go back to what they had (rollback --to), recorded as a rollout of its own', async (t) => {
  // a and c succeeded on app/tags/1.1.0; b failed and stayed on app/tags/1.0.0.
  const {state, id, revert, calls, fleet} = await revertable(t, {revert: 'none', 'max-failures': '5'})
  const result = await revert(['--json'])
  t.is(result.exitCode, 0, result.stderr)
  const json = JSON.parse(result.stdout)
  t.like(json, {reverts: id, ok: true, groups: [{release: 'app/tags/1.0.0', nodes: ['a', 'c']}], skipped: []})
  t.deepEqual(json.rollouts[0].nodes.map((node: {node: string; state: string; before: string; applied: string}) => [node.node, node.state, node.before, node.applied]), [
    ['a', 'succeeded', 'app/tags/1.1.0', 'app/tags/1.0.0'],
    ['c', 'succeeded', 'app/tags/1.1.0', 'app/tags/1.0.0'],
  ])
  const rollbacks = (await calls()).filter((call) => call.action === 'rollback')
  t.deepEqual(rollbacks.map((call) => [call.nodes, call.args]), [[['a', 'c'], {to: 'app/tags/1.0.0'}]], 'rollback --to the release before, only on the nodes moved, no --save')
  t.deepEqual(Object.values(await fleet()).map((node: any) => node.applied), ['app/tags/1.0.0', 'app/tags/1.0.0', 'app/tags/1.0.0'])
  const list = await cli(['rollout', 'list', '--state-dir', state])
  t.regex(list.stdout, new RegExp(`^${json.rollouts[0].id}\\s+done\\s+app/tags/1\\.0\\.0 \\(revert\\)`, 'm'))
  const show = await cli(['rollout', 'show', json.rollouts[0].id, '--state-dir', state])
  t.regex(show.stdout, new RegExp(`2 nodes back to app/tags/1\\.0\\.0 \\(putting back rollout ${id}\\)`))
})

test.serial('rollout revert of a --save rollout puts the pointers back too; of a --noop rollout, nothing to put back and no node asked', async (t) => {
  const saved = await revertable(t, {save: true, revert: 'none', 'max-failures': '5'})
  t.is((await saved.revert()).exitCode, 0)
  t.deepEqual((await saved.calls()).filter((call) => call.action === 'rollback').map((call) => call.args), [{to: 'app/tags/1.0.0', save: 'true'}])
  const noop = await revertable(t, {noop: true, 'max-failures': '5'})
  const nothing = await noop.revert()
  t.is(nothing.exitCode, 0, nothing.stderr)
  t.regex(nothing.stdout, new RegExp(`rollout ${noop.id} moved no node: nothing to put back`))
  t.deepEqual(await noop.calls(), [])
})

test.serial('rollout revert of a rollout still driven by its process is 73; rollout revrt is a typo of it (64)', async (t) => {
  const {state, id, revert, calls} = await revertable(t, {revert: 'none'})
  const path = join(state, 'rollouts', `${id}.json`)
  const record = JSON.parse(await readFile(path, 'utf8'))
  const {processStartTime} = await import('../../src/lib/util/process.js')
  await writeFile(path, JSON.stringify({...record, status: 'running', pid: process.pid, pidStart: processStartTime(process.pid)}), {mode: 0o600})
  const busy = await revert()
  t.is(busy.exitCode, 73, busy.stderr)
  t.regex(busy.stderr, new RegExp(`rollout ${id} is still being driven by process ${process.pid}`))
  t.deepEqual(await calls(), [])
  for (const args of [['revrt'], ['revrt', id], ['reevrt', id, '--json']]) {
    const typo = await cli(['rollout', ...args, '--state-dir', state])
    t.is(typo.exitCode, 64, args.join(' '))
    t.regex(typo.stdout + typo.stderr, /did you mean localpuppet rollout revert\?/, args.join(' '))
  }

  const extra = await cli(['rollout', 'foo/tags/1.0.0', 'bar', '--state-dir', state])
  t.is(extra.exitCode, 64)
  t.regex(extra.stderr, /^localpuppet: unexpected argument "bar": rollout takes one REF$/m)
  t.deepEqual(await calls(), [])
  const resumed = await cli(['rollout', '--resume', id, 'foo/tags/1.0.0', '--canary', '1', '--state-dir', state])
  t.is(resumed.exitCode, 64, resumed.stderr)
  t.regex(resumed.stderr, /^localpuppet: --resume continues a rollout with the settings and nodes it was recorded with: REF, --canary cannot be given with it$/m)
  t.deepEqual(await calls(), [])
})

test.serial('a revert cut off by the broker is recorded, and rollout --resume continues it with rollback, not apply', async (t) => {
  const {state, bin, env, revert, calls, fleet} = await revertable(t, {revert: 'none', 'max-failures': '5'})
  await writeFile(join(bin, 'fail-once'), '')
  const cut = await revert(['--json'])
  t.is(cut.exitCode, 69, cut.stderr)
  const [interrupted] = JSON.parse((await cli(['rollout', 'list', '--state-dir', state, '--json'])).stdout)
  t.like(interrupted, {status: 'interrupted', ref: 'app/tags/1.0.0'})
  const resumed = await cli(['rollout', '--resume', interrupted.id, '--state-dir', state, '--json'], {env})
  t.is(resumed.exitCode, 0, resumed.stderr)
  t.deepEqual(JSON.parse(resumed.stdout).nodes.map((node: {applied: string}) => node.applied), ['app/tags/1.0.0', 'app/tags/1.0.0'])
  t.deepEqual([...new Set((await calls()).map((call) => call.action))].sort(), ['rollback', 'status'], 'no apply was sent')
  t.deepEqual(Object.values(await fleet()).map((node: any) => node.applied), ['app/tags/1.0.0', 'app/tags/1.0.0', 'app/tags/1.0.0'])
})

test.serial('a source that cannot be reached is 69, saying REF was being checked; --source without a REF is 64; neither asks a node', async (t) => {
  const {run, touched} = await operator(t)
  const unreachable = await run(['foo/tags/1.4.0', '--source', 'http://127.0.0.1:9/repo', '--insecure'])
  t.is(unreachable.exitCode, 69, unreachable.stderr)
  t.regex(unreachable.stderr, /^ {2}hint: REF is checked in the source before any node is asked/m)
  const noRef = await run(['--source', shared.repo])
  t.is(noRef.exitCode, 64, noRef.stderr)
  t.regex(noRef.stderr, /--source checks REF in the repository: give a REF, or drop --source/)
  t.deepEqual(await touched(), {mco: false, records: 0})
})
