import chalk from 'chalk'

import {CHECKS, type ValidateReport} from '../lib/validate/validate-inputs.js'

/** Human output: each input with its problems, then a count. */
export function renderValidateText(report: ValidateReport): string {
  const lines: string[] = []
  for (const input of report.inputs) {
    const release = input.release ? chalk.dim(` (${input.release})`) : ''
    if (input.problems.length === 0) {
      lines.push(`${chalk.green('ok')}    ${input.file}${release}`)
      continue
    }

    lines.push(`${chalk.red('FAIL')}  ${input.file}${release}`)
    for (const problem of input.problems) lines.push(`  ${chalk.dim(problem.check.padEnd(10))} ${problem.message}`)
  }

  const failed = report.inputs.filter((input) => input.problems.length > 0).length
  lines.push('', `${report.inputs.length} input(s), ${failed} with problems, ${report.problems} problem(s)`)
  return lines.join('\n')
}

/**
 * JUnit XML as CI systems read it: one testsuite per input, one testcase per check, a
 * failure element per problem so each shows inline with its file and line.
 */
export function renderValidateJunit(report: ValidateReport): string {
  const out = ['<?xml version="1.0" encoding="UTF-8"?>']
  const failures = report.inputs.reduce((sum, input) => sum + CHECKS.filter((check) => input.problems.some((p) => p.check === check)).length, 0)
  out.push(`<testsuites name="localpuppet validate" tests="${report.inputs.length * CHECKS.length}" failures="${failures}">`)
  for (const input of report.inputs) {
    const failed = CHECKS.filter((check) => input.problems.some((p) => p.check === check)).length
    out.push(`  <testsuite name="${xml(input.file)}" tests="${CHECKS.length}" failures="${failed}">`)
    for (const check of CHECKS) {
      const problems = input.problems.filter((p) => p.check === check)
      const attrs = `classname="${xml(input.file)}" name="${check}"${problems[0]?.file ? ` file="${xml(problems[0].file)}"` : ''}${problems[0]?.line ? ` line="${problems[0].line}"` : ''}`
      if (problems.length === 0) {
        out.push(`    <testcase ${attrs}/>`)
        continue
      }

      out.push(`    <testcase ${attrs}>`)
      for (const problem of problems) out.push(`      <failure type="${check}" message="${xml(problem.message)}">${xml(problem.message)}</failure>`)
      out.push('    </testcase>')
    }

    out.push('  </testsuite>')
  }

  out.push('</testsuites>')
  return out.join('\n')
}

function xml(text: string): string {
  return text
    .replace(/[\u0000-\u0008\u000B\u000C\u000E-\u001F]/g, '')
    .replaceAll('&', '&amp;')
    .replaceAll('<', '&lt;')
    .replaceAll('>', '&gt;')
    .replaceAll('"', '&quot;')
    .replaceAll("'", '&apos;')
}
