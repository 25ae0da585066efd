import {execFileSync} from 'node:child_process'
import {writeFileSync} from 'node:fs'
import {join} from 'node:path'

import test from 'ava'

// @ts-expect-error bin/version.js is a plain JavaScript build script
import {buildVersion} from '../../bin/version.js'
import {versionLine} from '../../src/cli/version.js'
import {tempDir} from '../helpers/temp.js'

const runtime = {platform: 'linux', arch: 'x64', node: 'v18.20.4'}
const git = (dir: string, ...args: string[]) => execFileSync('git', ['-C', dir, ...args], {encoding: 'utf8'}).trim()
const debianOrder = (a: string, op: string, b: string) => {
  try {
    execFileSync('dpkg', ['--compare-versions', a, op, b])
    return true
  } catch {
    return false
  }
}

test('--version names the version and the commit it was built from, and says when it was not a build', (t) => {
  t.is(versionLine({version: '1.2.0+3.gabcdef0', commit: 'abcdef0123', dirty: false}, runtime), 'localpuppet 1.2.0+3.gabcdef0 (commit abcdef0123) linux-x64 node-v18.20.4\n')
  t.regex(versionLine({version: '1.2.0', commit: 'abcdef0123', dirty: true}, runtime), /\(commit abcdef0123 with uncommitted changes\)/)
  t.regex(versionLine(null, runtime), /^localpuppet unknown \(commit unknown: not a build\)/)
})

test('the version follows the tags: none yet, at a tag, after a tag, a pre-release; each later one sorts later for dpkg', async (t) => {
  const dir = await tempDir(t)
  writeFileSync(join(dir, 'package.json'), '{"version": "0.1.0"}\n')
  t.deepEqual(buildVersion(dir), {version: '0.1.0', commit: null, dirty: false}, 'not a git checkout: package.json, commit unknown')
  git(dir, 'init', '-q')
  git(dir, 'add', 'package.json')
  const commit = () => {
    git(dir, 'commit', '-q', '--allow-empty', '-m', 'x')
    return git(dir, 'rev-parse', 'HEAD')
  }

  const first = commit()
  const untagged = buildVersion(dir)
  t.deepEqual(untagged, {version: `0.1.0~1.g${first.slice(0, 7)}`, commit: first, dirty: false})
  git(dir, 'tag', 'v0.1.0')
  t.is(buildVersion(dir).version, '0.1.0')
  const next = commit()
  const after = buildVersion(dir).version
  t.is(after, `0.1.0+1.g${next.slice(0, 7)}`)
  git(dir, 'tag', 'v0.2.0-rc.1')
  const rc = buildVersion(dir).version
  t.is(rc, '0.2.0~rc.1')
  writeFileSync(join(dir, 'package.json'), '{"version": "0.1.0", "x": 1}\n')
  t.true(buildVersion(dir).dirty)
  const order = [untagged.version, '0.1.0', after, rc, '0.2.0']
  for (let i = 1; i < order.length; i++) t.true(debianOrder(order[i - 1], 'lt', order[i]), `${order[i - 1]} < ${order[i]}`)
})
