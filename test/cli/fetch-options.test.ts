import test from 'ava'

import {describeFetch} from '../../src/cli/fetch-options.js'
import type {FetchResult} from '../../src/lib/source/release-source.js'

const installed = (files: {shared: number; written: number; downloaded: number}) => ({release: 'foo/tags/1.5.0', ref: 'foo@^1.5', status: 'installed' as const, bytes: 624, modulepath: ['foo/tags/1.5.0'], delivery: 'objects' as const, files})

test('a delivery of objects says how many files were shared and written (adding up to the files installed) and from how many downloads, each with its plural', (t) => {
  const result: FetchResult = {source: 'https://repo.example.com/puppet', signedBy: null, releases: [installed({shared: 1, written: 1, downloaded: 1})]}
  t.deepEqual(describeFetch(result), ['fetched foo/tags/1.5.0 from https://repo.example.com/puppet (624 B: 1 file shared with installed tags, 1 file written from 1 download)'])
  result.releases = [installed({shared: 0, written: 3, downloaded: 2})]
  t.deepEqual(describeFetch(result), ['fetched foo/tags/1.5.0 from https://repo.example.com/puppet (624 B: 0 files shared with installed tags, 3 files written from 2 downloads)'])
})

test("a fetch through the node's own document says so on the input's line, with the document's version", (t) => {
  const result: FetchResult = {
    source: 'https://repo.example.com/puppet',
    signedBy: null,
    releases: [],
    nodeDocument: {version: 1_795_838_786_467, expires: '2026-12-28T04:06:26.467Z'},
    nodeInput: {node: 'web2', sha256: 'a'.repeat(64), status: 'unchanged'},
  }
  t.deepEqual(describeFetch(result), ['input of node web2 from https://repo.example.com/puppet, through its own document version 1795838786467: unchanged (sha256 aaaaaaaaaaaa)'])
})
