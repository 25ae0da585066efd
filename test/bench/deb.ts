/**
 * `pack --format deb` against `dpkg-deb --build` of the same package tree laid out by hand
 * (the tree pack builds, extracted with `dpkg-deb -R`): what localpuppet adds to Debian's
 * own tool is resolving, hashing the files (then streaming them into gzip), the record
 * and the preinst. Target <= 1.3. BENCH_DEB_FILES and BENCH_DEB_FILE_KB size the release.
 */
import {execFileSync} from 'node:child_process'
import {mkdirSync, rmSync} from 'node:fs'
import {join} from 'node:path'

import {syntheticRelease} from './delivery.js'

type Time = (file: string, args: string[], env?: NodeJS.ProcessEnv, before?: () => void) => number
type Compare = (name: string, target: number | null, a: () => number, b: () => number, rounds?: number) => number

/** bench.ts passes its own timing and comparison, and the delivery bench's data, so all parts measure alike. */
export function debBench(dir: string, bin: string, {time, compare, rounds}: {time: Time; compare: Compare; rounds: number}): void {
  const files = Number(process.env.BENCH_DEB_FILES ?? 3000)
  const kb = Number(process.env.BENCH_DEB_FILE_KB ?? 20)
  const root = join(dir, 'deb')
  const modules = join(root, 'modules')
  syntheticRelease(join(modules, 'benchdeb', 'tags', '1.0.0'), files, kb)
  const out = join(root, 'out')
  const node = '/srv/localpuppet-bench/modules'
  mkdirSync(out, {recursive: true})
  const pack = [bin, 'pack', 'benchdeb/tags/1.0.0', '--format', 'deb', '--module-dir', modules, '-o', out, '--node-module-dir', node]
  execFileSync('node', pack, {stdio: 'ignore'})
  const built = join(out, 'localpuppet-benchdeb-1.0.0_1.0.0_all.deb')
  // The same tree by hand: exactly what pack gave dpkg-deb, control files included.
  const tree = join(root, 'tree')
  execFileSync('dpkg-deb', ['-R', built, tree])
  const plain = join(root, 'plain.deb')
  console.log(`deb: ${files} files x ${kb} KiB (${((files * kb) / 1024).toFixed(0)} MB), gzip -6, median of ${rounds}`)
  compare(
    'pack deb / dpkg-deb',
    1.3,
    () => time('node', pack, {}, () => rmSync(built, {force: true})),
    () => time('dpkg-deb', ['--root-owner-group', '-Zgzip', '-z6', '--build', tree, plain], {SOURCE_DATE_EPOCH: '0'}, () => rmSync(plain, {force: true})),
    rounds,
  )
}
