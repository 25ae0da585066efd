import test from 'ava'

import {renderHistory, renderRunOutcome, renderRunRecord} from '../../../src/cli/render/run-text.js'
import {type RunRecord, newRunRecord} from '../../../src/lib/state/run-record.js'

// eslint-disable-next-line no-control-regex
const UNSAFE = /[\u0000-\u0009\u000B-\u001F\u007F-\u009F\u200B-\u200F\u2028-\u202E\u2060-\u2069\uFEFF]/u

function record(fields: Partial<RunRecord>): RunRecord {
  return {...newRunRecord('20261122T091631.123Z-aaaa', '/x/puppet.log', new Date('2026-11-22T09:16:31.123Z'), {}), state: 'failed', release: 'foo/tags/1.4.0', ref: 'foo@^1.4', ...fields} as RunRecord
}

test("status: Puppet's line and a server's message are shown escaped on their rows, a URL in them without its password", (t) => {
  const shown = renderRunRecord(
    record({
      error: 'fetch failed: http://ops:s3cret@repo.example/index.json: HTTP 503\nlocalpuppet: succeeded',
      firstError: 'Error: Could not retrieve https://u:s3cret@files.example/x: 401 \u001B]0;owned\u0007\u202E',
      reason: 'line one\u2028line two',
    }),
    {lastCompleted: null, puppetDisabled: {message: 'maint\u001B[2J'}, pointer: 'foo/tags/1.4.0\u0085', pointerFile: '/etc/puppet/input.yaml'},
  )
  t.false(UNSAFE.test(shown), shown)
  t.false(shown.includes('s3cret'))
  t.regex(shown, /^error +fetch failed: http:\/\/repo\.example\/index\.json: HTTP 503\\nlocalpuppet: succeeded$/m)
  t.regex(shown, /^puppet said +Error: Could not retrieve https:\/\/files\.example\/x: 401 \\e\]0;owned\\u0007\\u202e$/m)
  t.regex(shown, /^reason +line one\\u2028line two$/m)
  t.regex(shown, /^puppet +disabled: maint\\e\[2J$/m)
  t.regex(shown, /^input app +foo\/tags\/1\.4\.0\\u0085 {2}\(\/etc\/puppet\/input\.yaml\)$/m)
  t.false(UNSAFE.test(renderRunOutcome(record({error: 'x\u001B[2J\ny'}))))
})

test('history: a release with a newline or an escape stays on its row', (t) => {
  const shown = renderHistory([record({release: 'foo/tags/1.4.0\nforged  row\u001B[2J'}), record({})])
  t.false(UNSAFE.test(shown), shown)
  t.is(shown.split('\n').length, 3)
})
