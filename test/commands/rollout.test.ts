import {chmod, readdir, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import test, {type ExecutionContext} from 'ava'

import {cli} from '../helpers/cli.js'
import {sharedDemoRepository} from '../helpers/repository.js'
import {exists, tempDir} from '../helpers/temp.js'

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
  test(`rollout ${typo}: 64 with "did you mean localpuppet rollout ${command}", no node asked, nothing recorded`, async (t) => {
    const {run, touched} = await operator(t)
    const result = await run([typo, '-W', 'role=web'])
    t.is(result.exitCode, 64, result.stderr)
    const lines = result.stderr.trimEnd().split('\n')
    t.is(lines.length, 1, result.stderr)
    t.regex(lines[0], new RegExp(`"${typo}" is not a release reference \\(did you mean localpuppet rollout ${command}\\?\\)`))
    t.deepEqual(await touched(), {mco: false, records: 0})
  })
}

test('a REF that is no release reference and no typo of a command: 64 with the forms a REF takes; --json says it as JSON', async (t) => {
  const {run, touched} = await operator(t)
  const result = await run(['foo/tag/1.5.0', '--json'])
  t.is(result.exitCode, 64, result.stderr)
  const error = JSON.parse(result.stdout)
  t.regex(error.error?.message ?? error.message, /"foo\/tag\/1\.5\.0" is not a release reference/)
  t.deepEqual(await touched(), {mco: false, records: 0})
})

test('a REF the configured source does not hold: 66 once, from the client, naming the source; no node asked', async (t) => {
  const {run, touched} = await operator(t)
  const missing = await run(['foo/tags/9.9.9', '--source', shared.repo, '--trust', shared.pub])
  t.is(missing.exitCode, 66, missing.stderr)
  t.regex(missing.stderr, new RegExp(`REF foo/tags/9\\.9\\.9: not in the repository's index \\(source ${shared.repo}\\): no node was asked`))
  const noApp = await run(['bar@^1'], {LOCALPUPPET_SOURCE: shared.repo, LOCALPUPPET_TRUST: shared.pub})
  t.is(noApp.exitCode, 66, noApp.stderr)
  t.regex(noApp.stderr, /the repository has no app bar/)
  t.deepEqual(await touched(), {mco: false, records: 0})
})

test('a REF the source holds (a tag, a range) goes on to the fleet; with no source configured only its syntax is checked', async (t) => {
  for (const [ref, source] of [['foo/tags/1.4.0', shared.repo], ['foo@^1.3', shared.repo], ['foo/tags/9.9.9', null]] as const) {
    const {run, touched} = await operator(t)
    const result = await run([ref, ...(source ? ['--source', source, '--trust', shared.pub] : [])])
    // The fake mco finds no node: the rollout got as far as asking the fleet.
    t.is(result.exitCode, 1, `${ref}: ${result.stderr}`)
    t.regex(result.stderr, /no nodes matched the discovery filters/, ref)
    t.is((await touched()).mco, true, ref)
  }
})

test('the source is read as a node reads it, and nothing is written: an index signed by a key not trusted is 65', async (t) => {
  const {run, touched} = await operator(t)
  const dir = await tempDir(t)
  const other = join(dir, 'other.pub.pem')
  const {generateKeyPairSync} = await import('node:crypto')
  await writeFile(other, generateKeyPairSync('ed25519').publicKey.export({type: 'spki', format: 'pem'}))
  const result = await run(['foo/tags/1.4.0', '--source', shared.repo, '--trust', other])
  t.is(result.exitCode, 65, result.stderr)
  t.deepEqual(await touched(), {mco: false, records: 0})
})
