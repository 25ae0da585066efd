import {Config} from '@oclif/core'
import {runCommand} from '@oclif/test'
import test from 'ava'
import fc from 'fast-check'

import {BaseCommand, renderRefusal} from '../../src/cli/base-command.js'
import {LocalpuppetError} from '../../src/lib/errors.js'
import {shownMessage} from '../../src/cli/render/message-text.js'

const root = new URL('../..', import.meta.url).pathname
// eslint-disable-next-line no-control-regex
const UNSAFE = /[\u0000-\u001F\u007F-\u009F\u200B-\u200F\u2028-\u202E\u2060-\u2069\uFEFF]/u

test('an error message is one line on stderr, and each hint one more, whatever text built them (property)', (t) => {
  const text = fc.string({unit: 'binary', maxLength: 300})
  fc.assert(
    fc.property(text, fc.array(text, {maxLength: 3}), (message, suggestions) => {
      const out = renderRefusal({message, suggestions})
      if (!out.endsWith('\n')) return false
      const lines = out.slice(0, -1).split('\n')
      return lines.length === 1 + suggestions.length && lines.every((line) => !UNSAFE.test(line)) && lines[0].startsWith('localpuppet: ')
    }),
    {numRuns: 2000},
  )
  t.pass()
})

test('a message quoting a name through displayPath keeps its quoting; a URL in a message loses its credentials', (t) => {
  t.is(shownMessage('archive entry "foo/\\u001b]0;x": unsafe'), 'archive entry "foo/\\u001b]0;x": unsafe')
  t.is(shownMessage('repository http://ops:s3cret@10.0.0.5:8080/repo/: HTTP 503'), 'repository http://10.0.0.5:8080/repo/: HTTP 503')
  t.is(shownMessage('server said \u001B]0;owned\u0007\nforged'), 'server said \\e]0;owned\\u0007\\nforged')
})

test.serial('a refusal that quotes what the user typed shows C1 and bidi characters escaped: one line, nothing sent to the terminal', async (t) => {
  const {stderr} = await runCommand(['status', '\u009B2J\u202Eevil', '--state-dir', '/nonexistent'], {root})
  // (runCommand runs dist/: oclif may say so first.)
  t.is(stderr.slice(stderr.indexOf('localpuppet: ')), 'localpuppet: "\\u009b2J\\u202eevil" is not a run id (e.g. 20261122T091631.123Z-4f2a); localpuppet history lists them\n')
})

class Thrower extends BaseCommand {
  static thrown: LocalpuppetError = new LocalpuppetError('x', 65, '')
  async run(): Promise<void> {
    await this.parse(Thrower)
    throw Thrower.thrown
  }
}

/** What a command that throws `error` writes on stderr and its exit code, through BaseCommand's own catch. */
async function thrown(config: Config, error: LocalpuppetError, argv: string[] = []): Promise<{stderr: string; stdout: string; exit: number | undefined}> {
  Thrower.thrown = error
  const written = {stderr: '', stdout: ''}
  const writes = {stderr: process.stderr.write, stdout: process.stdout.write}
  process.stderr.write = ((chunk: string) => (written.stderr += chunk, true)) as typeof process.stderr.write
  process.stdout.write = ((chunk: string) => (written.stdout += chunk, true)) as typeof process.stdout.write
  try {
    await (new Thrower(argv, config) as unknown as {_run(): Promise<void>})._run()
    return {...written, exit: undefined}
  } catch (caught) {
    return {...written, exit: (caught as {oclif?: {exit?: number}}).oclif?.exit}
  } finally {
    Object.assign(process.stderr, {write: writes.stderr})
    Object.assign(process.stdout, {write: writes.stdout})
  }
}

test.serial("a command's error output holds no control character but its newlines, and --json keeps the message exact but for a URL's password, for any message (property, through BaseCommand's catch)", async (t) => {
  const config = await Config.load(root)
  const text = fc.string({unit: 'binary', maxLength: 200})
  await fc.assert(
    fc.asyncProperty(text, fc.array(text, {maxLength: 2}), async (message, suggestions) => {
      const human = await thrown(config, new LocalpuppetError('x', 65, message, suggestions))
      const lines = human.stderr.slice(0, -1).split('\n')
      if (human.exit !== 65 || !human.stderr.endsWith('\n') || lines.length !== 1 + suggestions.length || lines.some((line) => UNSAFE.test(line))) return false
      // (A message that itself holds a URL with credentials would rightly lose them: not this property's case.)
      fc.pre(!/:\/\/\S*@/.test(message))
      const json = await thrown(config, new LocalpuppetError('x', 65, `${message} http://ops:s3cret@h/`, suggestions), ['--json'])
      const error = JSON.parse(json.stdout).error
      return json.exit === 65 && error.message === `${message} http://h/` && json.stderr === ''
    }),
    {numRuns: 300},
  )
  t.pass()
})
