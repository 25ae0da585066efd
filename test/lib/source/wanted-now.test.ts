import test from 'ava'

import {resolveInIndex} from '../../../src/lib/source/wanted-now.js'
import type {RepositoryIndex} from '../../../src/lib/repository/repository-index.js'

const index: RepositoryIndex = {
  format: 1,
  version: 3,
  apps: {foo: {tags: {'1.3.0': {} as never, '1.4.0': {} as never, '2.0.0': {} as never}, channels: {stable: '1.3.0', canary: '1.4.0'}}},
}

test('a node input resolves through the index now: a channel to its tag, a tag to itself, a range to its newest match', (t) => {
  t.deepEqual(resolveInIndex('foo/channels/canary', index), {release: 'foo/tags/1.4.0', why: null})
  t.deepEqual(resolveInIndex('app/foo/channels/stable', index), {release: 'foo/tags/1.3.0', why: null})
  t.deepEqual(resolveInIndex('foo/tags/2.0.0', index), {release: 'foo/tags/2.0.0', why: null})
  t.deepEqual(resolveInIndex('foo@^1', index), {release: 'foo/tags/1.4.0', why: null})
  t.deepEqual(resolveInIndex('foo@1.3.0', index), {release: 'foo/tags/1.3.0', why: null})
})

test('trunk and branches keep the node\'s own resolution; what the index cannot resolve says why', (t) => {
  t.deepEqual(resolveInIndex('foo/trunk', index), {release: null, why: null})
  t.deepEqual(resolveInIndex('foo/branches/next', index), {release: null, why: null})
  t.like(resolveInIndex('foo/channels/beta', index), {release: null, why: 'foo/channels/beta: not in the repository\'s index (no channel beta of foo)'})
  t.like(resolveInIndex('bar/channels/stable', index), {release: null, why: 'bar/channels/stable: the repository has no app bar'})
  t.like(resolveInIndex('foo/tags/9.9.9', index), {release: null})
  t.like(resolveInIndex('foo@^3', index), {release: null})
})
