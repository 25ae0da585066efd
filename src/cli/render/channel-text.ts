import type {ChannelHistory, RepositoryListing} from '../../lib/channels/repository-listing.js'
import {MAX_CHANNEL_HISTORY, describePolicy} from '../../lib/repository/channel-records.js'
import {formatAge} from '../../lib/util/duration.js'
import {terminalText, terminalUrl} from '../../lib/util/terminal-text.js'
import {table} from './format.js'
import {columns} from './rollout-text.js'

/** How many tags of an app the text listing shows (newest first; yanked ones always): --json lists all. */
export const LISTED_TAGS = 20

/** The `signed by` line, as far as the listing could tell. */
const SIGNATURE: Record<RepositoryListing['signature'], (key: string | null) => string> = {
  verified: (key) => `${key} (verified with a trusted key)`,
  named: (key) => `${terminalText(key)} (as index.json.sig says; nodes verify it)`,
  unsigned: () => 'unsigned (no index.json.sig)',
  'not checked': () => 'not checked: no trusted key (--trust PUB.pem)',
}

/** A key id cut to what a person compares: `sha256:1a2b3c4d5e6f7a8b`. */
const shortKey = (key: string | null) => (key === null ? 'unsigned' : key.startsWith('sha256:') ? key.slice(0, 23) : key)

/** How many node inputs, and where they are listed: the index, or each node's own document (not readable as a node reads the repository). */
function nodeInputs(listing: RepositoryListing): string {
  const where = listing.nodeInputsIn === 'documents' ? 'each in its node\'s own document (publish --node-documents-only)' : null
  if (listing.nodes === null) return `not listed: ${where}; --repo DIR counts them`
  const named = listing.nodes.length > 0 ? 'names and apps: --json' : null
  const notes = [where, named].filter((note) => note !== null)
  return `${listing.nodes.length}${notes.length > 0 ? ` (${notes.join('; ')})` : ''}`
}

/** `repository list`: the index's identity, each app's channels (tag, policy, moves kept) and tags, the node inputs' count. */
export function renderRepositoryListing(listing: RepositoryListing, now = Date.now()): string {
  const left = listing.expires === null ? null : Date.parse(listing.expires) - now
  const head = table([
    ['repository', terminalUrl(listing.repo)],
    ['id', listing.repository ?? '- (an index made before ids)'],
    ['version', listing.version === null ? '- (an index made before versions)' : String(listing.version)],
    ['expires', listing.expires === null ? '-' : `${listing.expires} (${left! <= 0 ? 'EXPIRED: nodes take nothing new from it' : `in ${formatAge(left!)}`})`],
    ['signed by', SIGNATURE[listing.signature](listing.signedBy)],
    ['node inputs', nodeInputs(listing)],
  ])
  const apps = listing.apps.map((app) => {
    const channels = app.channels.map((channel) => [channel.channel, channel.tag, channel.policy ? describePolicy(channel.policy) : null, String(channel.moves)])
    for (const orphan of app.orphanPolicies) channels.push([orphan.channel, '(no such channel)', describePolicy(orphan.policy), '0'])
    const shown = app.tags.filter((tag, i) => i < LISTED_TAGS || tag.yanked !== null)
    const tags = shown.map((tag) => [tag.tag, terminalText(tag.publishedAt), terminalText(shortKey(tag.signedBy)), tag.yanked ? terminalText(`yanked ${tag.yanked.at}: ${tag.yanked.reason}`) : null])
    const more = app.tags.length - shown.length
    return [
      '',
      `${app.app}: ${app.tags.length} tag${app.tags.length === 1 ? '' : 's'}, ${app.channels.length} channel${app.channels.length === 1 ? '' : 's'}`,
      ...(channels.length > 0 ? [indent(columns(['CHANNEL', 'TAG', 'POLICY', 'MOVES'], channels))] : []),
      indent(columns(['TAG', 'PUBLISHED', 'ARCHIVE SIGNED BY', 'YANKED'], tags)),
      ...(more > 0 ? [`  ... and ${more} older (--json lists every tag)`] : []),
    ].join('\n')
  })
  return [head, ...apps].join('\n')
}

/** `channel history`: the channel's tag and policy, then its moves, newest first. */
export function renderChannelHistory(history: ChannelHistory): string {
  const rows = history.moves.map((move) => [
    move.at,
    move.action,
    move.from,
    move.to,
    shortKey(move.by),
    move.override ? terminalText(`policy overridden (${move.override.policy}): ${move.override.reason}`) : null,
  ])
  return [
    `${history.channel} ${history.tag === null ? 'names no tag' : `names ${history.tag}`}; policy: ${history.policy ? describePolicy(history.policy) : 'none'}`,
    rows.length > 0 ? columns(['WHEN', 'ACTION', 'FROM', 'TO', 'BY', 'NOTE'], rows) : 'no moves recorded (moves are recorded from this version of localpuppet on)',
    `(newest first; the index keeps the last ${MAX_CHANNEL_HISTORY} moves of each channel)`,
  ].join('\n')
}

const indent = (text: string) =>
  text
    .split('\n')
    .map((line) => `  ${line}`)
    .join('\n')
