#!/usr/bin/env node
// Prints /usr/share/doc/localpuppet/copyright for bin/deb: localpuppet, then every npm
// package the bundle carries (read from dist/'s source map and the lazy bundles), each
// with its version, licence and licence text from node_modules.
import {existsSync, readFileSync, readdirSync} from 'node:fs'
import {join} from 'node:path'
import {fileURLToPath} from 'node:url'

const root = fileURLToPath(new URL('../..', import.meta.url))
const map = JSON.parse(readFileSync(join(root, 'dist', 'cli.cjs.map'), 'utf8'))
// Each package's directory, nested ones (node_modules/a/node_modules/b) as they are.
// The lazy bundles (dist/undici.cjs, dist/age-encryption.cjs, and what age-encryption carries).
const dirs = new Set(['undici', 'age-encryption', '@noble/ciphers', '@noble/curves', '@noble/hashes', '@noble/post-quantum', '@scure/base'].map((name) => join(root, 'node_modules', name)).filter((dir) => existsSync(dir)))
for (const source of map.sources) {
  const at = source.lastIndexOf('node_modules/')
  const match = at === -1 ? null : /^node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(source.slice(at))
  if (match) dirs.add(join(root, 'dist', source.slice(0, at), 'node_modules', match[1]))
}
const out = [
  'localpuppet: masterless, versioned Puppet releases.',
  'Copyright: the localpuppet authors. The project has not stated a licence yet.',
  '',
  '/usr/share/localpuppet/dist/ is one esbuild bundle of localpuppet and these npm packages:',
]
const texts = []
const packages = [...dirs].map((dir) => ({dir, pkg: JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'))}))
packages.sort((a, b) => (`${a.pkg.name} ${a.pkg.version}` < `${b.pkg.name} ${b.pkg.version}` ? -1 : 1))
for (const {dir, pkg} of packages) {
  const name = pkg.name
  out.push(`  ${name} ${pkg.version} (${pkg.license ?? 'licence not stated'})`)
  const file = readdirSync(dir).find((f) => /^(licen[cs]e|copying)(\.md|\.txt)?$/i.test(f))
  // Debian has the Apache licence's text: policy wants a reference to it, not a copy.
  if (pkg.license === 'Apache-2.0') texts.push('', `${name} ${pkg.version}: Apache-2.0, see /usr/share/common-licenses/Apache-2.0`)
  else if (file && existsSync(join(dir, file))) texts.push('', `${name} ${pkg.version}: ${file}`, '', readFileSync(join(dir, file), 'utf8').replaceAll('\r', '').trimEnd())
}
process.stdout.write(`${[...out, ...texts].join('\n')}\n`)
