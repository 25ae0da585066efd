import test from 'ava'
import fc from 'fast-check'

import {redactUrl, terminalText, terminalUrl} from '../../../src/lib/util/terminal-text.js'

test('plain text is unchanged', (t) => {
  t.is(terminalText('web1.example.com: newest attempt failed (exit 1)'), 'web1.example.com: newest attempt failed (exit 1)')
  t.is(terminalText('C:\\path ünïcødé ✓'), 'C:\\path ünïcødé ✓')
})

test('escape sequences and newlines are shown escaped, never sent', (t) => {
  t.is(terminalText('\u001B]0;owned\u0007web1'), '\\e]0;owned\\u0007web1')
  t.is(terminalText('web1\nfoo/channels/stable: 1.3.0 -> 1.4.0'), 'web1\\nfoo/channels/stable: 1.3.0 -> 1.4.0')
  t.is(terminalText('a\u009Bb\u202Ec\u2028d'), 'a\\u009bb\\u202ec\\u2028d')
})

test('long values are cut', (t) => {
  t.is(terminalText('x'.repeat(50), 10), `${'x'.repeat(10)}…`)
})

test('no control or bidi character survives terminalText (property)', (t) => {
  fc.assert(
    fc.property(fc.string({unit: 'binary', maxLength: 200}), (value) => {
      const shown = terminalText(value, 1_000)
      // eslint-disable-next-line no-control-regex
      return !/[\u0000-\u001F\u007F-\u009F\u200B-\u200F\u2028-\u202E\u2060-\u2069\uFEFF]/u.test(shown)
    }),
  )
  t.pass()
})

test('URLs lose their credentials', (t) => {
  t.is(redactUrl('http://user:pass@prom.example:9090/x?q=1'), 'http://prom.example:9090/x?q=1')
  t.is(redactUrl('http://prom.example:9090'), 'http://prom.example:9090')
  t.is(redactUrl('fetch http://u:p@h/ failed'), 'fetch http://h/ failed')
  t.is(terminalUrl('http://u:p@h/\u001B[2J'), 'http://h/%1B[2J')
})
