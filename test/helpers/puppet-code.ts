/**
 * Generated Puppet code for validate's size cases (issue 33): a class of `count`
 * assignments, each reading the one before it (`$v1 = $v0`), so that every read is of a
 * local variable and the variable check looks each one up. `unknown` names a variable read
 * at the end that nothing defines (a problem under strict_variables), or null for none.
 */
export function assignmentsClass(name: string, count: number, unknown: string | null = null): string {
  const lines = [`class ${name} {`, '  $v0 = 0']
  for (let i = 1; i < count; i++) lines.push(`  $v${i} = $v${i - 1}`)
  if (unknown !== null) lines.push(`  notice("\${v${count - 1}} \${${unknown}}")`)
  lines.push('}', '')
  return lines.join('\n')
}
