import {shellQuote} from '../util/shell-quote.js'

/**
 * The exec ENC script Puppet runs (`--node_terminus exec --external_nodes SCRIPT`).
 * It prints the ENC file beside it with `cat`: the document never passes through a
 * shell, so quotes, `$(...)`, backticks or a line equal to any delimiter are inert.
 * Puppet appends the certname as an argument; the script ignores it.
 */
export function renderEncScript(encYamlPath: string, runId: string): string {
  return ['#!/bin/sh', `# localpuppet exec ENC for run ${runId}: prints the ENC document stored beside it.`, `exec cat -- ${shellQuote(encYamlPath)}`, ''].join('\n')
}
