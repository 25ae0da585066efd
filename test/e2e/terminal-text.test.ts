// Issue 33: text from outside (Puppet's words, a disable message, a server's answer, a
// source URL's credentials) as a person sees it: escaped on one line, URLs without their
// password; --json exact (URLs aside).
import {readFile} from 'node:fs/promises'
import {join} from 'node:path'

import test from 'ava'

import {cli, isolatePuppet} from '../helpers/cli.js'
import {tempDir, writeTree} from '../helpers/temp.js'

const TITLE = '\u001B]0;owned\u0007'
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u0009\u000B-\u001F\u007F-\u009F]/

test("a release whose code fails with an escape sequence and a newline, and a disable message with them: status, history, log, disable and enable show each escaped on its line; status --json keeps them exact", async (t) => {
  const dir = await tempDir(t)
  // Puppet's double-quoted string: ESC ] 0 ; owned BEL, a newline, and a line that would pass for ours.
  await writeTree(dir, {
    'modules/evil/trunk/evil/manifests/init.pp': 'class evil {\n  fail("\\u001B]0;owned\\u0007\\nlocalpuppet: succeeded evil/trunk")\n}\n',
    'input.yaml': 'app: evil/trunk\nclasses:\n  - evil\n',
  })
  const state = join(dir, 'state')
  const puppet = ['--', ...isolatePuppet(dir)]
  const applied = await cli(['apply', join(dir, 'input.yaml'), '--module-dir', join(dir, 'modules'), '--state-dir', state, ...puppet])
  t.is(applied.exitCode, 1, applied.stderr)

  const json = await cli(['status', '--state-dir', state, '--json', ...puppet])
  const record = JSON.parse(json.stdout)
  t.true(record.firstError.startsWith('Error: '), record.firstError)
  t.true(record.firstError.endsWith(TITLE), 'the record and --json keep Puppet\'s line exact')

  const status = await cli(['status', '--state-dir', state, ...puppet])
  t.is(status.exitCode, 1, status.stderr)
  t.false(CONTROL.test(status.stdout), 'no control character reaches the terminal')
  t.regex(status.stdout, /^puppet said +Error: .*Function Call, \\e\]0;owned\\u0007$/m)

  const history = await cli(['history', '--state-dir', state])
  t.false(CONTROL.test(history.stdout))
  t.is(history.stdout.split('\n').length, 2, 'a header and one row')

  const log = await cli(['log', '--state-dir', state])
  t.is(log.exitCode, 0)
  t.false(CONTROL.test(log.stdout), 'no control character reaches the terminal')
  t.regex(log.stdout, /Function Call, \\e\]0;owned\\u0007\n/)
  // The log file itself keeps Puppet's bytes.
  t.true((await readFile(join(state, 'runs', record.id, 'puppet.log'), 'utf8')).includes(TITLE))

  // A disable message, as the node's operator (or whoever wrote Puppet's lock file) gave it.
  const message = `maintenance${TITLE}\nlocalpuppet: enabled`
  const disabled = await cli(['disable', message, '--state-dir', state, ...puppet])
  t.is(disabled.exitCode, 0, disabled.stderr)
  t.false(CONTROL.test(disabled.stdout))
  t.regex(disabled.stdout, /^disabled: maintenance\\e\]0;owned\\u0007\\nlocalpuppet: enabled \(/)
  t.is(JSON.parse((await cli(['status', '--state-dir', state, '--json', ...puppet])).stdout).puppetDisabled.message, message)
  const whileDisabled = await cli(['status', '--state-dir', state, ...puppet])
  t.false(CONTROL.test(whileDisabled.stdout))
  t.regex(whileDisabled.stdout, /^puppet +disabled: maintenance\\e\]0;owned\\u0007\\nlocalpuppet: enabled$/m)
  const enabled = await cli(['enable', '--state-dir', state, ...puppet])
  t.is(enabled.exitCode, 0, enabled.stderr)
  t.is(enabled.stdout, 'enabled (was disabled: maintenance\\e]0;owned\\u0007\\nlocalpuppet: enabled)')
})
