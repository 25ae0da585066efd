/**
 * `BENCH=plan-real npm run bench`: `plan` on Debian's Puppet modules installed as a tag
 * (so every run verifies its ~6,000 files first), whole processes, interleaved:
 *
 *   plan keyed / node        plan with the verified files' stat keys kept (.localpuppet/verified/)
 *                            vs `node -e 0`
 *   plan keyed / plan read   the same plan vs one that reads every byte of the tag (the keys
 *                            removed before each run: what every run cost before they were kept)
 *
 * with the peak memory of each.
 */
import {spawnSync} from 'node:child_process'
import {mkdirSync, rmSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'

import {type BenchTools, realRelease} from './delivery.js'

export function planRealBench(tools: BenchTools, dir: string): void {
  const root = join(dir, 'plan-real')
  const source = join(root, 'source')
  if (!realRelease(join(source, 'real', 'tags', '1.0.0'))) {
    console.log('plan real: skipped (no puppet-module-* packages and not root to install them)')
    return
  }

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
  const forget = () => rmSync(join(modules, '.localpuppet', 'verified'), {recursive: true, force: true})
  // Keys are kept only for files older than two seconds.
  spawnSync('sleep', ['2.1'])
  const first = spawnSync('node', plan, {encoding: 'utf8'})
  if (first.status !== 0) throw new Error(`plan on the real release exited ${first.status}: ${first.stderr}`)
  const rounds = Math.max(tools.rounds, 9)
  tools.compare('plan keyed / node', null, () => tools.time('node', plan), () => tools.time('node', ['-e', '0']), rounds)
  tools.compare('plan keyed / read', 0.9, () => tools.time('node', plan), () => tools.time('node', plan, {}, forget), rounds)
  const keyed = tools.peakMb('node', plan)
  forget()
  const read = tools.peakMb('node', plan)
  console.log(`plan real: peak ${keyed.toFixed(0)} MB keyed, ${read.toFixed(0)} MB reading every byte`)
  rmSync(root, {recursive: true, force: true})
}
