import {readFile} from 'node:fs/promises'
import {join} from 'node:path'

import test from 'ava'

import {syntaxProblems} from '../../../src/lib/catalog/parser-validate.js'
import {runPuppetRuby} from '../../../src/lib/catalog/puppet-ruby.js'
import {type CompileJob, compileCatalogs} from '../../../src/lib/validate/compile-catalogs.js'
import {tempDir, writeTree} from '../../helpers/temp.js'

/** Whether a process runs (a zombie, killed and not yet reaped, does not). */
const alive = async (pid: number) => {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => null)
  return stat !== null && stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z'
}

/** A puppet whose "ruby" answers once, then starts a child that never ends and waits for it (its pid in child.pid). */
async function silentPuppet(dir: string): Promise<string> {
  await writeTree(dir, {
    'bin/ruby': {mode: 0o755, content: `#!/bin/sh\necho '{"library":{"version":"7.23.0","file":null}}'\nsleep 600 &\necho $! > ${dir}/child.pid\nwait\n`},
    'bin/puppet': {mode: 0o755, content: `#!${join(dir, 'bin', 'ruby')}\n`},
  })
  return join(dir, 'bin', 'puppet')
}

// Issue 33: validate's Puppet process had no bound in time: a manifest it took an hour on
// held every CI run for that hour. Each step (one answer line) now has one.
test('a Puppet process that goes silent past the step bound is stopped, with what it answered kept', async (t) => {
  const dir = await tempDir(t)
  const run = await runPuppetRuby(await silentPuppet(dir), '', {}, {stepTimeoutMs: 500})
  t.true(run.timedOut)
  t.deepEqual(run.answers, [{library: {version: '7.23.0', file: null}}])
  t.regex(run.ended, /^stopped: no answer in 0\.5 s/)
  const child = Number(await readFile(join(dir, 'child.pid'), 'utf8'))
  t.false(await alive(child), 'what it started is stopped too')
})

test('stopped for time, the first file without an answer is named as the one Puppet did not finish; the rest were not checked', (t) => {
  const answers = [{syntax: '/m/a.pp', errors: []}]
  const problems = syntaxProblems(['/m/a.pp', '/m/b.pp', '/m/c.pp'], answers, {ended: 'stopped: no answer in 120 s', timedOut: true})
  t.deepEqual(
    problems.map((p) => [p.file, p.message]),
    [
      ['/m/b.pp', 'Puppet did not finish checking this file (stopped: no answer in 120 s)'],
      ['/m/c.pp', 'Puppet stopped before checking this file (stopped: no answer in 120 s)'],
    ],
  )
})

test('validate --compile stopped for time: the input Puppet was compiling is named as not finished, the rest as not compiled', async (t) => {
  const dir = await tempDir(t)
  const job = (id: string): CompileJob => ({id, enc: 'classes: {}\n', modulepath: [], environment: 'production', manifest: null, facts: {}, settings: []})
  const checked = await compileCatalogs(await silentPuppet(dir), [job('0'), job('1')], [], [], [], 500)
  t.deepEqual(
    checked.results.map((result) => result.error?.message),
    ["Puppet did not finish compiling this input (stopped: no answer in 0.5 s, validate's bound on one step)", "Puppet stopped before compiling this input (stopped: no answer in 0.5 s, validate's bound on one step)"],
  )
})
