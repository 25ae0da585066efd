#!/usr/bin/env node
// The version a build of localpuppet carries, from the project's git tags (vX.Y.Z):
//   HEAD at a tag vX.Y.Z                    X.Y.Z
//   N commits after the newest tag vX.Y.Z   X.Y.Z+N.gHASH   (after X.Y.Z, before the next tag)
//   no tag yet (a young clone)              P~N.gHASH       (P: package.json's version; N:
//                                                            commits in HEAD, so later builds
//                                                            sort later; before P's own tag)
//   not a git checkout (an unpacked tarball) P, commit unknown
// Each is a valid Debian version; the commit is the full hash, `dirty` when the work tree
// had changes. bin/build.js writes it to dist/build.json, `localpuppet --version` prints
// it and bin/deb names the package after it. `node bin/version.js` prints it as JSON.
import {execFileSync} from 'node:child_process'
import {readFileSync} from 'node:fs'
import {join} from 'node:path'
import {fileURLToPath} from 'node:url'

/** {version, commit, dirty} of the checkout at root. */
export function buildVersion(root) {
  const base = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).version
  const git = (...args) => execFileSync('git', ['-C', root, ...args], {encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore']}).trim()
  let commit
  try {
    commit = git('rev-parse', '--verify', 'HEAD^{commit}')
  } catch {
    return {version: base, commit: null, dirty: false}
  }
  const dirty = git('status', '--porcelain', '--untracked-files=no') !== ''
  const hash = commit.slice(0, 7)
  let described = null
  try {
    described = git('describe', '--tags', '--long', '--match', 'v[0-9]*', 'HEAD')
  } catch {}
  const match = described && /^v(\d+\.\d+\.\d+(?:[-~][0-9A-Za-z.]+)?)-(\d+)-g[0-9a-f]+$/.exec(described)
  let version
  if (match) {
    // A pre-release tag (v2.0.0-rc.1) sorts before 2.0.0 in Debian's order with ~.
    const tag = match[1].replace('-', '~')
    version = match[2] === '0' ? tag : `${tag}+${match[2]}.g${hash}`
  } else {
    version = `${base}~${git('rev-list', '--count', 'HEAD')}.g${hash}`
  }
  return {version, commit, dirty}
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  process.stdout.write(`${JSON.stringify(buildVersion(fileURLToPath(new URL('..', import.meta.url))))}\n`)
}
