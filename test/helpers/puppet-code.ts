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

/**
 * A module `many`'s init.pp, as generated code can be: `count` classes `many::cN`, each
 * with a resource, all on one line (the third), after a class `many` (second line) that
 * includes them all and a comment with a multibyte character (first line). With
 * `unknownAt`, class many::c<unknownAt> reads `${nope}` and `$other` instead.
 */
export function oneLineClasses(count: number, unknownAt: number | null = null): {code: string; line: string} {
  const classes = Array.from({length: count}, (_, i) => `class many::c${i} { $a = ${i} file { "/t/é\${a}": } }`)
  if (unknownAt !== null) classes[unknownAt] = `class many::c${unknownAt} { $a = 1 notice("é \${a} \${nope}") $b = $other }`
  const line = classes.join(' ')
  return {code: `# café: every class on one line\nclass many { include ${Array.from({length: count}, (_, i) => `many::c${i}`).join(', ')} }\n${line}\n`, line}
}
