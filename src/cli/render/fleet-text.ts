import chalk from 'chalk'

import type {ChannelHealth} from '../../lib/fleet/channel-health.js'
import {columns} from './rollout-text.js'
import {terminalText, terminalUrl} from '../../lib/util/terminal-text.js'

/** promote --require-healthy: each node following the channel, and whether it is there yet. */
export function renderChannelHealth(health: ChannelHealth): string {
  // Node names, releases and reasons come from each node's own metrics: shown escaped.
  const rows = health.nodes.map((node) => [terminalText(node.node), terminalText(node.applied), node.state === 'healthy' ? chalk.green(node.state) : chalk.red(node.state), terminalText(node.reason)])
  const table = rows.length > 0 ? [columns(['NODE', 'APPLIED', 'HEALTH', 'WHY'], rows), ''] : []
  return [...table, `${health.ok ? 'healthy' : 'not healthy'}: ${terminalText(health.why)} (${health.source ?? 'Prometheus'} ${terminalUrl(health.prometheus)}, at ${health.at})`].join('\n')
}
