/**
 * `BENCH=plan-real npm run bench`: `plan` on Debian's Puppet modules installed as a tag
 * (so every run verifies its ~6,000 files first), whole processes, interleaved:
 *
 *   plan keyed / node        plan with the verified files' stat keys kept (.localpuppet/verified/)
 *                            vs `node -e 0`
 *   plan keyed / read        the same plan vs one that reads every byte of the tag and keeps
 *                            no keys (`.localpuppet/verified` a plain file, so that no key
 *                            is read or written: what every run cost before they were kept)
 *
 * with the peak memory of each, and the number of Debian modules in the release.
 */
import {spawnSync} from 'node:child_process'
import {mkdirSync, rmSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'

import {type BenchTools, realRelease} from './delivery.js'

export function planRealBench(tools: BenchTools, dir: string): void {
  const root = join(dir, 'plan-real')
  const source = join(root, 'source')
  const count = realRelease(join(source, 'real', 'tags', '1.0.0'))
  if (count === 0) {
    console.log('plan real: skipped (no puppet-module-* packages and not root to install them)')
    return
  }

  console.log(`plan real: ${count} Debian modules installed as one tag, classes ntp and memcached`)

  const modules = join(root, 'modules')
  mkdirSync(modules, {recursive: true})
  const archive = join(root, 'real.tar.gz')
  for (const args of [['pack', 'real@1.0.0', '--module-dir', source, '-o', archive], ['install', archive, '--module-dir', modules]]) {
    const result = spawnSync('node', [tools.bin, ...args], {encoding: 'utf8'})
    if (result.status !== 0) throw new Error(`localpuppet ${args.join(' ')} exited ${result.status}: ${result.stderr}`)
  }

  const input = join(root, 'input.yaml')
  writeFileSync(input, 'app: real@1.0.0\nclasses:\n  ntp:\n  memcached:\n')
  const plan = [tools.bin, 'plan', input, '--module-dir', modules, '--state-dir', join(root, 'state')]
  const verified = join(modules, '.localpuppet', 'verified')
  const saved = join(root, 'verified-saved')
  // Keys are kept only for files older than two seconds.
  spawnSync('sleep', ['2.1'])
  const first = spawnSync('node', plan, {encoding: 'utf8'})
  if (first.status !== 0) throw new Error(`plan on the real release exited ${first.status}: ${first.stderr}`)
  spawnSync('cp', ['-a', verified, saved])
  // The keys as the first plan kept them; or none read or written (a plain file where their directory would be).
  const keys = () => {
    rmSync(verified, {recursive: true, force: true})
    spawnSync('cp', ['-a', saved, verified])
  }

  const none = () => {
    rmSync(verified, {recursive: true, force: true})
    writeFileSync(verified, '')
  }

  const rounds = Math.max(tools.rounds, 9)
  tools.compare('plan keyed / node', null, () => tools.time('node', plan, {}, keys), () => tools.time('node', ['-e', '0']), rounds)
  tools.compare('plan keyed / read', 0.9, () => tools.time('node', plan, {}, keys), () => tools.time('node', plan, {}, none), rounds)
  keys()
  const keyed = tools.peakMb('node', plan)
  none()
  const read = tools.peakMb('node', plan)
  console.log(`plan real: peak ${keyed.toFixed(0)} MB keyed, ${read.toFixed(0)} MB reading every byte`)
  rmSync(root, {recursive: true, force: true})
}
