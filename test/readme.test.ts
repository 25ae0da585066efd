import {readFile} from 'node:fs/promises'

import test from 'ava'

import {APPLY_EXIT_CODES, FETCH_EXIT_CODES, INSTALL_EXIT_CODES, STATUS_EXIT_CODES} from '../src/lib/exit-codes.js'
import {COMMANDS} from '../src/commands/index.js'

const readme = await readFile(new URL('../README.md', import.meta.url), 'utf8')

test('the README has the exit-code tables exactly as --help shows them', (t) => {
  for (const row of [...APPLY_EXIT_CODES, ...STATUS_EXIT_CODES, ...INSTALL_EXIT_CODES, ...FETCH_EXIT_CODES]) {
    t.true(readme.includes(`| ${row.code} | ${row.meaning} |`), `README row for ${row.code}: ${row.meaning}`)
  }
})

test('the README documents every command with an example', (t) => {
  for (const id of Object.keys(COMMANDS)) {
    t.regex(readme, new RegExp(`### \`localpuppet ${id}\\b`), `a section for ${id}`)
    t.regex(readme, new RegExp(`^localpuppet ${id}\\b`, 'm'), `an example of ${id}`)
  }
})

test('the README quick start has the two set-up command lines', (t) => {
  t.regex(readme, /## Quick start[\s\S]*bin\/setup && npm run demo[\s\S]*bin\/setup && npm test/)
})
