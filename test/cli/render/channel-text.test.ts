import test from 'ava'

import {renderChannelHistory, renderRepositoryListing} from '../../../src/cli/render/channel-text.js'
import type {ChannelHistory, RepositoryListing} from '../../../src/lib/channels/repository-listing.js'

const KEY = `sha256:${'e'.repeat(64)}`
const HOSTILE = 'fails\u001B]0;pwned\u0007\nlocalpuppet: all good'

test('repository list: what the index says (a yank reason, a publish time) is shown escaped, one line each; an old index says what it lacks', (t) => {
  const listing: RepositoryListing = {
    repo: '/srv/www/puppet',
    repository: null,
    version: null,
    expires: null,
    expired: false,
    signedBy: null,
    signature: 'unsigned',
    apps: [
      {
        app: 'foo',
        tags: [
          {tag: '1.5.0', publishedAt: '2026-11-28T00:00:00.000Z\u001B[2J', signedBy: KEY, yanked: {at: '2026-11-28T01:00:00.000Z', reason: HOSTILE, by: null}},
          ...Array.from({length: 30}, (_, i) => ({tag: `1.0.${29 - i}`, publishedAt: '2026-11-01T00:00:00.000Z', signedBy: null, yanked: null})),
        ],
        channels: [{channel: 'stable', tag: '1.0.29', policy: {requireHealthy: 'canary', forMs: 1_800_000, minNodes: 2, setAt: '2026-11-28T00:00:00.000Z', setBy: null}, moves: 3}],
        orphanPolicies: [{channel: 'prod', policy: {requireHealthy: 'stable', forMs: 0, minNodes: 1, setAt: '2026-11-28T00:00:00.000Z', setBy: null}}],
      },
    ],
    nodeInputsIn: 'index',
    nodes: [],
  }
  const text = renderRepositoryListing(listing)
  t.false(/[\u0000-\u0009\u000B-\u001F]/.test(text), 'no control character but newlines reaches the terminal')
  t.false(text.includes('\nlocalpuppet: all good'), 'a reason cannot forge a line')
  t.regex(text, /1\.5\.0 .*yanked 2026-11-28T01:00:00\.000Z: fails\\e\]0;pwned\\u0007\\nlocalpuppet: all good/)
  t.regex(text, /^id +- \(an index made before ids\)$/m)
  t.regex(text, /^ {2}stable +1\.0\.29 +healthy on canary for 30m, at least 2 nodes +3$/m)
  t.regex(text, /^ {2}prod +\(no such channel\) +healthy on stable, at least 1 node/m)
  t.regex(text, /\.\.\. and 11 older \(--json lists every tag\)/, '20 newest shown, and the yanked one')
})

test('repository list: node inputs each in their own document are counted from the publisher\'s copy, and read as a node reads the repository they are "not listed", never 0', (t) => {
  const listing: RepositoryListing = {repo: 'https://repo.example.com/puppet', repository: 'r', version: 5, expires: null, expired: false, signedBy: null, signature: 'not checked', apps: [], nodeInputsIn: 'documents', nodes: null}
  t.regex(renderRepositoryListing(listing), /^node inputs +not listed: each in its node's own document \(publish --node-documents-only\); --repo DIR counts them$/m)
  const publisher = {...listing, nodes: [{node: 'web1', app: 'foo/channels/stable', publishedAt: '2026-11-28T00:00:00.000Z'}]}
  t.regex(renderRepositoryListing(publisher), /^node inputs +1 \(each in its node's own document \(publish --node-documents-only\); names and apps: --json\)$/m)
  t.regex(renderRepositoryListing({...publisher, nodeInputsIn: 'index'}), /^node inputs +1 \(names and apps: --json\)$/m)
})

test('channel history: newest first, the override\'s reason escaped, key ids cut to what a person compares', (t) => {
  const history: ChannelHistory = {
    repo: '/srv/www/puppet',
    channel: 'foo/channels/stable',
    tag: '1.4.0',
    policy: null,
    kept: 50,
    moves: [
      {at: '2026-11-28T02:00:00.000Z', action: 'promote', from: '1.3.0', to: '1.4.0', by: KEY, override: {reason: HOSTILE, policy: 'healthy on canary, at least 1 node'}},
      {at: '2026-11-28T01:00:00.000Z', action: 'back', from: '1.4.0', to: '1.3.0', by: null},
    ],
  }
  const lines = renderChannelHistory(history).split('\n')
  t.is(lines[0], 'foo/channels/stable names 1.4.0; policy: none')
  t.regex(lines[2], /^2026-11-28T02:00:00\.000Z {2}promote {2}1\.3\.0 {2}1\.4\.0 {2}sha256:eeeeeeeeeeeeeeee {2}policy overridden \(healthy on canary, at least 1 node\): fails\\e/)
  t.regex(lines[3], /^2026-11-28T01:00:00\.000Z {2}back {5}1\.4\.0 {2}1\.3\.0 {2}unsigned/)
  t.is(lines.length, 5)
})
