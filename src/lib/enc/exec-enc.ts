/**
 * The exec ENC script Puppet runs (`--node_terminus exec --external_nodes SCRIPT`).
 * It prints the ENC file beside it with `cat`: the document never passes through a
 * shell, so quotes, `$(...)`, backticks or a line equal to any delimiter are inert.
 * Puppet appends the certname as an argument; the script ignores it.
 */
export function renderEncScript(encYamlPath: string, runId: string): string {
  return ['#!/bin/sh', `# localpuppet exec ENC for run ${runId}: prints the ENC document stored beside it.`, `exec cat -- ${shellQuote(encYamlPath)}`, ''].join('\n')
}

/** Quotes one word for /bin/sh: single quotes, with each ' written as '\''. */
export function shellQuote(word: string): string {
  if (/^[A-Za-z0-9_@%+=:,./-]+$/.test(word)) return word
  return `'${word.replaceAll("'", `'\\''`)}'`
}
