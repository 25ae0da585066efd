import chalk from 'chalk'

import type {ChannelHealth} from '../../lib/fleet/channel-health.js'
import {columns} from './rollout-text.js'

/** promote --require-healthy: each node following the channel, and whether it is there yet. */
export function renderChannelHealth(health: ChannelHealth): string {
  const rows = health.nodes.map((node) => [node.node, node.applied, node.state === 'healthy' ? chalk.green(node.state) : chalk.red(node.state), node.reason])
  const table = rows.length > 0 ? [columns(['NODE', 'APPLIED', 'HEALTH', 'WHY'], rows), ''] : []
  return [...table, `${health.ok ? 'healthy' : 'not healthy'}: ${health.why} (Prometheus ${health.prometheus}, at ${health.at})`].join('\n')
}
