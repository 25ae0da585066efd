import {execFileSync} from 'node:child_process'
import {writeFileSync} from 'node:fs'
import {join} from 'node:path'

import test from 'ava'

// @ts-expect-error bin/reference.js is a plain JavaScript build script
import {bashCompletion, commandReference} from '../../bin/reference.js'
import {tempDir} from '../helpers/temp.js'

/** What bash offers for the words typed so far (the last one is being completed). */
function complete(script: string, words: string[]): string[] {
  const program = `. "$0"; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _localpuppet; printf '%s\\n' "\${COMPREPLY[@]}"`
  return execFileSync('bash', ['-c', program, script, ...words], {encoding: 'utf8'}).split('\n').filter(Boolean)
}

test('bash completion offers the commands, a topic\'s commands, and each command\'s own flags', async (t) => {
  const file = join(await tempDir(t), 'localpuppet.bash')
  writeFileSync(file, bashCompletion(await commandReference()) as string)
  t.deepEqual(complete(file, ['localpuppet', 'ro']), ['rollback', 'rollout'])
  t.deepEqual(complete(file, ['localpuppet', 'rollout', 'sh']), ['show'])
  t.deepEqual(complete(file, ['localpuppet', 'fleet', '']), ['status'])
  t.deepEqual(complete(file, ['localpuppet', 'apply', '--no']), ['--noop'])
  t.deepEqual(complete(file, ['localpuppet', 'fleet', 'status', '--with-i']), ['--with-identity'])
  t.deepEqual(complete(file, ['localpuppet', 'apply', 'input']), [], 'an argument: bash completes files (-o default)')
  t.false(complete(file, ['localpuppet', 'plan', '--']).includes('--save'), 'apply\'s flags are not plan\'s')
})
