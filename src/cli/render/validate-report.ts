import chalk from 'chalk'

import type {CheckName, ValidateReport} from '../../lib/validate/report.js'
import {terminalText} from '../../lib/util/terminal-text.js'

/** Human output: each input with its problems, then a count. */
export function renderValidateText(report: ValidateReport): string {
  const lines: string[] = []
  for (const input of report.inputs) {
    const compiled = input.compile?.status === 'compiled' ? `, compiled: ${input.compile.resources} resources` : ''
    // Messages quote Puppet, a module's metadata, an input's values: each one line, escaped.
    const release = input.release ? chalk.dim(` (${terminalText(input.release)}${compiled})`) : ''
    const warnings = input.warnings.map((warning) => `  ${chalk.yellow('warning'.padEnd(12))} ${terminalText(warning.message)}`)
    if (input.problems.length === 0) {
      lines.push(`${chalk.green('ok')}    ${terminalText(input.file)}${release}`, ...warnings)
      continue
    }

    lines.push(`${chalk.red('FAIL')}  ${terminalText(input.file)}${release}`)
    for (const problem of input.problems) lines.push(`  ${chalk.dim(problem.check.padEnd(12))} ${terminalText(problem.message)}`)
    lines.push(...warnings)
  }

  const failed = report.inputs.filter((input) => input.problems.length > 0).length
  lines.push('', `${report.inputs.length} input(s), ${failed} with problems, ${report.problems} problem(s)`)
  if (report.puppetUnavailable !== null) lines.push(`not checked (${report.checks.includes('compile') ? 'syntax, compile' : 'syntax'}): ${terminalText(report.puppetUnavailable)}`)
  return lines.join('\n')
}

/**
 * JUnit XML as CI systems read it: one testsuite per input, one testcase per check (with
 * --compile, a `compile` one, skipped when the input could not be compiled), a failure
 * element per problem so each shows inline with its file and line. A check that did not
 * run for an input (`requirements` when which Puppet this is cannot be told, `variables`
 * when the language mode lets unknown variables pass) is skipped with the reason, never
 * shown as passed. When Puppet could not be run, `syntax` is an error (not a pass) and
 * `compile` skipped, with the reason.
 */
export function renderValidateJunit(report: ValidateReport): string {
  const out = ['<?xml version="1.0" encoding="UTF-8"?>']
  const checks = report.checks
  const failures = report.inputs.reduce((sum, input) => sum + checks.filter((check) => input.problems.some((p) => p.check === check)).length, 0)
  const skippedCase = (input: ValidateReport['inputs'][number], check: CheckName) =>
    !input.problems.some((p) => p.check === check) && (check === 'compile' ? input.compile?.status === 'skipped' : input.skipped[check] !== undefined)
  const skipped = report.inputs.reduce((sum, input) => sum + checks.filter((check) => skippedCase(input, check)).length, 0)
  const errors = report.puppetUnavailable === null ? 0 : report.inputs.length
  out.push(`<testsuites name="localpuppet validate" tests="${report.inputs.length * checks.length}" failures="${failures}"${errors ? ` errors="${errors}"` : ''}${skipped ? ` skipped="${skipped}"` : ''}>`)
  for (const input of report.inputs) {
    const failed = checks.filter((check) => input.problems.some((p) => p.check === check)).length
    out.push(`  <testsuite name="${xml(input.file)}" tests="${checks.length}" failures="${failed}">`)
    for (const check of checks) {
      const problems = input.problems.filter((p) => p.check === check)
      const attrs = `classname="${xml(input.file)}" name="${check}"${problems[0]?.file ? ` file="${xml(problems[0].file)}"` : ''}${problems[0]?.line ? ` line="${problems[0].line}"` : ''}`
      if (check === 'compile' && problems.length === 0 && input.compile?.status === 'skipped') {
        out.push(`    <testcase ${attrs}><skipped message="${xml(`not compiled: ${input.compile.reason}`)}"/></testcase>`)
        continue
      }

      if (check !== 'compile' && skippedCase(input, check)) {
        out.push(`    <testcase ${attrs}><skipped message="${xml(input.skipped[check]!)}"/></testcase>`)
        continue
      }

      if (problems.length === 0 && report.puppetUnavailable !== null && check === 'syntax') {
        out.push(`    <testcase ${attrs}><error message="${xml(report.puppetUnavailable)}"/></testcase>`)
        continue
      }

      const warnings = input.warnings.filter((w) => w.check === check)
      if (problems.length === 0) {
        out.push(warnings.length === 0 ? `    <testcase ${attrs}/>` : `    <testcase ${attrs}><system-out>${xmlLines(warnings.map((w) => `warning: ${w.message}`))}</system-out></testcase>`)
        continue
      }

      out.push(`    <testcase ${attrs}>`)
      for (const problem of problems) out.push(`      <failure type="${check}" message="${xml(problem.message)}">${xmlLines([problem.message])}</failure>`)
      out.push('    </testcase>')
    }

    out.push('  </testsuite>')
  }

  out.push('</testsuites>')
  return out.join('\n')
}

/**
 * Text for an XML 1.0 attribute: one line, as a terminal shows it (control characters, which
 * XML 1.0 cannot carry at all, and a newline, which a parser would turn into a space,
 * written out as `\e`, `\n`, `\u0007`), then escaped.
 */
function xml(text: string): string {
  return escapeXml(terminalText(text, Number.POSITIVE_INFINITY))
}

/** Lines for an XML element's body: each as `xml` makes it, kept on lines of their own. */
function xmlLines(lines: string[]): string {
  return lines.flatMap((text) => text.split('\n')).map(xml).join('\n')
}

/** Characters no XML 1.0 document may hold that terminalText lets through (a lone surrogate, U+FFFE, U+FFFF), written out as `\ud800`. */
const NOT_XML = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]|[\uFFFE\uFFFF]/g

function escapeXml(text: string): string {
  return text
    .replace(NOT_XML, (char) => `\\u${char.charCodeAt(0).toString(16)}`)
    .replaceAll('&', '&amp;')
    .replaceAll('<', '&lt;')
    .replaceAll('>', '&gt;')
    .replaceAll('"', '&quot;')
    .replaceAll("'", '&apos;')
}
