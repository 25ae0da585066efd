import {execFileSync} from 'node:child_process'
import {readFile} from 'node:fs/promises'
import {fileURLToPath} from 'node:url'

import test from 'ava'

import {APPLY_EXIT_CODES, FETCH_EXIT_CODES, INSTALL_EXIT_CODES, ROLLOUT_EXIT_CODES, STATUS_EXIT_CODES} from '../src/lib/exit-codes.js'
import {COMMANDS} from '../src/commands/index.js'
import {readManual} from './helpers/manual.js'

const readme = await readFile(new URL('../README.md', import.meta.url), 'utf8')
const manual = await readManual()

test('the README has the exit-code tables exactly as --help shows them (fetch\'s in its guide, docs/delivery.md)', (t) => {
  for (const row of [...APPLY_EXIT_CODES, ...STATUS_EXIT_CODES, ...INSTALL_EXIT_CODES, ...ROLLOUT_EXIT_CODES]) {
    t.true(readme.includes(`| ${row.code} | ${row.meaning} |`), `README row for ${row.code}: ${row.meaning}`)
  }

  for (const row of FETCH_EXIT_CODES) t.true(manual.includes(`| ${row.code} | ${row.meaning} |`), `manual row for ${row.code}: ${row.meaning}`)
})

test('the README has an example of every command, and the manual (README and docs/) a section for each', (t) => {
  for (const id of Object.keys(COMMANDS).map((name) => name.replaceAll(':', ' '))) {
    t.regex(manual, new RegExp(`^#{2,3} \`localpuppet ${id}\\b`, 'm'), `a section for ${id}`)
    t.regex(readme, new RegExp(`^localpuppet ${id}\\b`, 'm'), `an example of ${id}`)
  }
})

test('the README quick start has the two set-up command lines, and CI runs exactly the test one', async (t) => {
  t.regex(readme, /## Quick start[\s\S]*\nbin\/setup && npm run demo +#[\s\S]*\nbin\/setup --tests && npm test +#/)
  const ci = (await readFile(new URL('../.ci/run', import.meta.url), 'utf8')).trim().split('\n')
  t.is(ci.at(-1), 'bin/setup --tests && npm test')
})

// Issue 27, item 8: the README says exactly which Debian packages each set-up command installs.
test('the README names exactly the Debian packages bin/setup and bin/setup --tests install', async (t) => {
  const setup = fileURLToPath(new URL('../bin/setup', import.meta.url))
  const list = (...args: string[]) => execFileSync(setup, [...args, '--list'], {encoding: 'utf8'}).trim().split('\n')
  const bullet = (start: string) => {
    const match = new RegExp(`^- \`${start.replace(/[-/]/g, '\\$&')}\`, [^:]*:([^\\n]*(?:\\n  [^\\n]*)*)`, 'm').exec(readme)
    return [...(match?.[1] ?? '').matchAll(/`([a-z0-9][a-z0-9+.-]*)`/g)].map((m) => m[1])
  }
  const run = list()
  t.deepEqual(bullet('bin/setup'), run)
  t.deepEqual(bullet('bin/setup --tests'), list('--tests').filter((name) => !run.includes(name)))
  t.false(run.includes('rabbitmq-server'), 'running the tool needs no message broker')
})
