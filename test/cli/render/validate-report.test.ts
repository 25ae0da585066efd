import test from 'ava'
import fc from 'fast-check'
import {XMLParser, XMLValidator} from 'fast-xml-parser'

import {renderValidateJunit, renderValidateText} from '../../../src/cli/render/validate-report.js'
import type {ValidateReport} from '../../../src/lib/validate/report.js'

function report(message: string, file = 'nodes/web1.yaml'): ValidateReport {
  const problem = {check: 'syntax' as const, file: 'site.pp', line: 3, column: null, message}
  return {
    checks: ['input', 'syntax'],
    inputs: [{file, release: 'foo/tags/1.4.0', problems: [problem], warnings: [{...problem, check: 'input', message: `warning ${message}`}], skipped: {}, languageMode: null}],
    problems: 1,
    puppetUnavailable: null,
    puppet: null,
  }
}

// Characters XML 1.0 cannot hold at all, and what a terminal must not receive.
const NOT_XML = /[^\t\n\r\u0020-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/u
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u0009\u000B-\u001F\u007F-\u009F\u202E]/

test("JUnit shows what Puppet said escaped, on one line in the failure's message: a CI system parses it and reads the escape, never loses it", (t) => {
  const out = renderValidateJunit(report('syntax error at \u001B]0;owned\u0007\nforged <b>&amp;\uD800 \uFFFE'))
  t.is(XMLValidator.validate(out), true)
  t.false(NOT_XML.test(out))
  const parsed = new XMLParser({ignoreAttributes: false, processEntities: true}).parse(out)
  const failure = parsed.testsuites.testsuite.testcase.find((c: {'@_name': string}) => c['@_name'] === 'syntax').failure
  t.is(failure['@_message'], 'syntax error at \\e]0;owned\\u0007\\nforged <b>&amp;\\ud800 \\ufffe')
})

test('JUnit is well-formed XML 1.0 whatever the messages and file names say (property)', (t) => {
  const text = fc.string({unit: 'binary', maxLength: 200})
  fc.assert(
    fc.property(text, text, (message, file) => {
      const out = renderValidateJunit(report(message, file))
      return XMLValidator.validate(out) === true && !NOT_XML.test(out)
    }),
    {numRuns: 1000},
  )
  t.pass()
})

test("the text report keeps each problem on its own line, escaped", (t) => {
  const out = renderValidateText(report('bad\u001B[2J\nFAIL  forged.yaml\u202E'))
  t.false(CONTROL.test(out), out)
  t.regex(out, /^ {2}syntax +bad\\e\[2J\\nFAIL {2}forged\.yaml\\u202e$/m)
  t.is(out.split('\n').length, 5, 'the input, its problem, its warning, a blank line and the count')
})
