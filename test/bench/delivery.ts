/**
 * Delivery benchmark (`BENCH=delivery npm run bench`): pack, install and verify of one
 * release against the C tools doing the same job on the same tree, whole processes
 * (start-up, fsync and all), interleaved, medians, with each command's peak RSS. Three
 * data sets:
 *
 *   real       the Puppet modules Debian packages (`puppet-module-*`, ~90 modules, ~6,000
 *              mostly small text files); installed with apt-get when missing. Measured at
 *              each scale of BENCH_SCALES (default 1,4,16): that many copies of the
 *              modules under different names in one release (16x: ~96,000 files, 600 MB),
 *              to show what grows with the number of files
 *   synthetic  BENCH_FILES files of BENCH_FILE_KB KiB of random hex digits (10,000 x 20 KiB)
 *   text       many small text-like files (10,000 files of 1-20 KB, words and indentation)
 *
 * BENCH_SETS=real,text picks data sets. Every tree has an empty directory, and the round
 * trip (pack, install, the installed tree equal to the source) is checked before timing
 * (at 1x). Baselines: `tar -czf`; `tar -xzf` then `sync -f` on the target (install makes
 * every file durable before a tag appears); `find -print0 | xargs -0 sha256sum`.
 * BENCH_ROUNDS is halved from 4x and quartered at 16x (at least 3 rounds each).
 */
import {spawnSync} from 'node:child_process'
import {cpSync, existsSync, mkdirSync, readdirSync, rmSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'

export interface BenchTools {
  bin: string
  rounds: number
  time(file: string, args: string[], env?: NodeJS.ProcessEnv, before?: () => void): number
  peakMb(file: string, args: string[]): number
  compare(name: string, target: number | null, a: () => number, b: () => number, rounds?: number): number
}

const DEBIAN_MODULES = '/usr/share/puppet/modules'

/**
 * Installs Debian's puppet-module-* packages when fewer than 50 are there (bench-only
 * data); returns how many modules there are, saying so when that is still fewer (not
 * root, or apt unreachable): every figure is then for fewer files.
 */
function ensureDebianModules(): number {
  const count = () => (existsSync(DEBIAN_MODULES) ? readdirSync(DEBIAN_MODULES).length : 0)
  const search = spawnSync('apt-cache', ['search', '--names-only', '^puppet-module-'], {encoding: 'utf8'})
  const names = (search.stdout ?? '').split('\n').map((line) => line.split(' ')[0]).filter(Boolean)
  if (count() < 50 && names.length > 0 && process.getuid?.() === 0) {
    spawnSync('apt-get', ['install', '-y', '-q', '-o', 'DPkg::Lock::Timeout=600', ...names], {stdio: 'ignore', env: {...process.env, DEBIAN_FRONTEND: 'noninteractive'}})
  }

  const found = count()
  if (found > 0 && found < 50) console.log(`note: only ${found} Debian Puppet modules are installed (${names.length} puppet-module-* packages listed; not root, or apt unreachable): the figures are for fewer files`)
  return found
}

/**
 * Debian's modules, dereferenced (they are alternatives symlinks), as one release;
 * `copies` times under different names (`ntp`, `ntp_c2`, ...). Returns how many modules
 * were copied once (0: none installed, nothing made).
 */
export function realRelease(root: string, copies = 1): number {
  const modules = ensureDebianModules()
  if (modules === 0) return 0
  mkdirSync(root, {recursive: true})
  for (let copy = 1; copy <= copies; copy++) {
    for (const name of readdirSync(DEBIAN_MODULES)) cpSync(join(DEBIAN_MODULES, name), join(root, copy === 1 ? name : `${name}_c${copy}`), {recursive: true, dereference: true})
  }

  writeFileSync(join(root, 'manifest.yaml'), 'modulepath: []\n')
  return modules
}

/** xorshift32: the same data on every run. */
function random(seed: number): () => number {
  let x = seed
  return () => {
    x ^= x << 13
    x ^= x >>> 17
    x ^= x << 5
    return x >>> 0
  }
}

/** `count` files of `kb` KiB each: pseudo-random hex text, compressible about 2:1. */
export function syntheticRelease(root: string, count: number, kb: number): void {
  const next = random(0x9e3779b9)
  const line = Buffer.alloc(kb * 1024)
  for (let i = 0; i < count; i++) {
    const dir = join(root, `mod${Math.floor(i / 100)}`, 'files')
    if (i % 100 === 0) mkdirSync(dir, {recursive: true})
    for (let j = 0; j < line.length; j++) line[j] = j % 64 === 63 ? 10 : 48 + (next() % 16)
    writeFileSync(join(dir, `f${i}.txt`), line)
  }

  writeFileSync(join(root, 'manifest.yaml'), 'modulepath: []\n')
}

const WORDS = 'class define include require notify ensure present absent file package service exec content source owner group mode path unless onlyif refreshonly subscribe before if else elsif unless case default undef true false String Integer Boolean Optional Hash Array Enum'.split(' ')

/** `count` text files of 1-20 KB made of Puppet-like words and indentation (compresses ~4:1, like real code). */
function textRelease(root: string, count: number): void {
  const next = random(0x2545f491)
  for (let i = 0; i < count; i++) {
    const dir = join(root, `mod${Math.floor(i / 50)}`, ['manifests', 'templates', 'lib/puppet/type', 'spec/classes'][i % 4])
    if (i % 50 < 4) mkdirSync(dir, {recursive: true})
    const size = 1000 + (next() % 19_000)
    let text = ''
    while (text.length < size) {
      let line = '  '.repeat(next() % 4)
      for (let w = next() % 8; w >= 0; w--) line += WORDS[next() % WORDS.length] + (next() % 5 === 0 ? ` => '${next().toString(36)}',` : ' ')
      text += line + '\n'
    }

    writeFileSync(join(dir, `f${i}.${['pp', 'erb', 'rb', 'rb'][i % 4]}`), text)
  }

  writeFileSync(join(root, 'manifest.yaml'), 'modulepath: []\n')
}

/** Pack, install, and the installed tree must equal the source (empty directories too). */
function roundTrip(tools: BenchTools, modules: string, release: string, work: string): void {
  mkdirSync(work, {recursive: true})
  const archive = join(work, 'roundtrip.tar.gz')
  const target = join(work, 'roundtrip')
  mkdirSync(target)
  const run = (args: string[]) => {
    const result = spawnSync('node', [tools.bin, ...args], {encoding: 'utf8'})
    if (result.status !== 0) throw new Error(`localpuppet ${args.join(' ')} exited ${result.status}: ${result.stderr}`)
  }

  run(['pack', release, '--module-dir', modules, '-o', archive])
  run(['install', archive, '--module-dir', target])
  const diff = spawnSync('diff', ['-r', join(modules, release), join(target, release)], {encoding: 'utf8'})
  const dirs = (root: string) => spawnSync('find', [root, '-type', 'd', '-empty'], {encoding: 'utf8'}).stdout.split('\n').filter(Boolean).map((p) => p.slice(root.length)).sort().join('\n')
  if (diff.status !== 0 || dirs(join(modules, release)) !== dirs(join(target, release))) {
    throw new Error(`round trip of ${release} differs:\n${diff.stdout}${diff.stderr}`)
  }

  // Same tree, same bytes.
  const again = join(work, 'roundtrip2.tar.gz')
  run(['pack', release, '--module-dir', modules, '-o', again])
  if (spawnSync('cmp', ['-s', archive, again]).status !== 0) throw new Error(`pack of ${release} is not byte-identical run to run`)
  chmodTree(target)
  rmSync(work, {recursive: true, force: true})
}

/** Installed tags are read-only: give write back before removing them. */
function chmodTree(path: string): void {
  spawnSync('chmod', ['-R', 'u+w', path])
}

/** One scale's figures, for the summary table. */
interface Figures {
  name: string
  files: number
  pack: number
  install: number
  /** install / tar -xzf (no durability). */
  untar: number
  verify: number
  packMb: number
  installMb: number
  verifyMb: number
}

/** The targets: install within 1.5x of a tar that also makes its files durable, verify within sha256sum at 4x, peak RSS under 150 MB at every scale. */
const MEMORY_TARGET_MB = 150

function measure(tools: BenchTools, name: string, modules: string, release: string, work: string, scale = 1, what = ''): Figures {
  const source = join(modules, release)
  const files = spawnSync('sh', ['-c', `find '${source}' -type f | wc -l; du -sm '${source}' | cut -f1`], {encoding: 'utf8'}).stdout.trim().split('\n')
  const rounds = Math.max(3, Math.floor(tools.rounds / (scale >= 16 ? 4 : scale >= 4 ? 2 : 1)))
  console.log(`delivery ${name}: ${what}${files[0]} files, ${files[1]} MB, median of ${rounds}`)
  if (scale === 1) roundTrip(tools, modules, release, join(work, 'check'))
  mkdirSync(work, {recursive: true})
  const archive = join(work, 'bench.tar.gz')
  const plain = join(work, 'plain.tar.gz')
  const pack = tools.compare(
    'pack / tar -czf',
    1.3,
    () => tools.time('node', [tools.bin, 'pack', release, '--module-dir', modules, '-o', archive], {}, () => rmSync(archive, {force: true})),
    () => tools.time('tar', ['-czf', plain, '-C', modules, release]),
    rounds,
  )
  const target = join(work, 'installed')
  const untarred = join(work, 'untarred')
  const fresh = (path: string) => () => {
    chmodTree(path)
    rmSync(path, {recursive: true, force: true})
    mkdirSync(path, {recursive: true})
  }

  const install = tools.compare(
    'install / tar+sync',
    1.5,
    () => tools.time('node', [tools.bin, 'install', archive, '--module-dir', target], {}, fresh(target)),
    () => tools.time('sh', ['-c', `tar -xzf '${archive}' -C '${untarred}' && sync -f '${untarred}'`], {}, fresh(untarred)),
    rounds,
  )
  // For the record: against a tar that leaves its files in the page cache (install makes
  // every file durable before a tag appears, which this tar does not).
  const untar = tools.compare(
    'install / tar -xzf',
    null,
    () => tools.time('node', [tools.bin, 'install', archive, '--module-dir', target], {}, fresh(target)),
    () => tools.time('tar', ['-xzf', archive, '-C', untarred], {}, fresh(untarred)),
    rounds,
  )
  const verify = tools.compare(
    'verify / sha256sum',
    // The target is set at 4x (24,000 files); at 1x start-up weighs, at 16x it is shown for the record.
    scale === 4 ? 1.0 : null,
    () => tools.time('node', [tools.bin, 'verify', '--module-dir', target]),
    () => tools.time('sh', ['-c', `find '${join(target, release)}' -type f -print0 | xargs -0 sha256sum > /dev/null`]),
    rounds,
  )
  fresh(target)()
  const packMb = tools.peakMb('node', [tools.bin, 'pack', release, '--module-dir', modules, '-o', join(work, 'mem.tar.gz')])
  const installMb = tools.peakMb('node', [tools.bin, 'install', archive, '--module-dir', target])
  const verifyMb = tools.peakMb('node', [tools.bin, 'verify', '--module-dir', target])
  const verdict = Math.max(packMb, installMb, verifyMb) < MEMORY_TARGET_MB ? 'ok' : 'OVER TARGET'
  console.log(`peak memory      pack ${packMb.toFixed(0)} MB, install ${installMb.toFixed(0)} MB, verify ${verifyMb.toFixed(0)} MB (target < ${MEMORY_TARGET_MB} each, ${verdict})`)
  fresh(target)()
  return {name, files: Number(files[0]), pack, install, untar, verify, packMb, installMb, verifyMb}
}

function summary(figures: Figures[]): void {
  if (figures.length < 2) return
  console.log('delivery summary (ratios against the baseline run beside it; peak RSS in MB)')
  console.log('set          files   pack  install  untar  verify   pack MB  install MB  verify MB')
  console.log('                          (tar+sync) (tar -xzf)')
  for (const f of figures) {
    const row = [f.name.padEnd(9), String(f.files).padStart(8), f.pack.toFixed(2).padStart(6), f.install.toFixed(2).padStart(8), f.untar.toFixed(2).padStart(6), f.verify.toFixed(2).padStart(7), f.packMb.toFixed(0).padStart(9), f.installMb.toFixed(0).padStart(11), f.verifyMb.toFixed(0).padStart(10)]
    console.log(row.join(' '))
  }
}

/** Runs the delivery benchmark on each data set in its own directory under `dir`. */
export function delivery(tools: BenchTools, dir: string): void {
  const sets = (process.env.BENCH_SETS ?? 'real,synthetic,text').split(',')
  const scales = (process.env.BENCH_SCALES ?? '1,4,16').split(',').map(Number)
  if (scales.some((scale) => !Number.isInteger(scale) || scale < 1)) throw new Error(`BENCH_SCALES: whole numbers of copies, such as 1,4,16`)
  const figures: Figures[] = []
  for (const set of sets) {
    if (set === 'real') {
      for (const scale of scales) {
        const base = join(dir, `delivery-real-${scale}`)
        const release = 'real/tags/1.0.0'
        const count = realRelease(join(base, 'modules', release), scale)
        if (count === 0) {
          console.log('delivery real: skipped (no puppet-module-* packages and not root to install them)')
          break
        }

        mkdirSync(join(base, 'modules', release, 'emptymod', 'files', 'empty'), {recursive: true})
        figures.push(measure(tools, `real ${scale}x`, join(base, 'modules'), release, join(base, 'work'), scale, `${count} Debian modules x ${scale}, `))
        chmodTree(base)
        rmSync(base, {recursive: true, force: true})
      }

      continue
    }

    const modules = join(dir, `delivery-${set}`, 'modules')
    const release = `${set}/tags/1.0.0`
    const root = join(modules, release)
    if (set === 'synthetic') syntheticRelease(root, Number(process.env.BENCH_FILES ?? 10_000), Number(process.env.BENCH_FILE_KB ?? 20))
    else if (set === 'text') textRelease(root, Number(process.env.BENCH_TEXT_FILES ?? 10_000))
    else throw new Error(`BENCH_SETS: unknown data set ${set}`)
    // Puppet modules keep empty directories (a `files/` managed with recurse => true).
    mkdirSync(join(root, 'emptymod', 'files', 'empty'), {recursive: true})
    figures.push(measure(tools, set, modules, release, join(dir, `delivery-${set}`, 'work')))
    chmodTree(join(dir, `delivery-${set}`))
    rmSync(join(dir, `delivery-${set}`), {recursive: true, force: true})
  }

  summary(figures)
}

/**
 * `apply / puppet` on a real release: Debian's modules packed and installed as `real/tags/1.0.0`, two of their
 * classes applied with --noop (nothing on the machine changes), against the very puppet
 * command localpuppet ran, started directly.
 */
export function applyReal(tools: BenchTools, dir: string, isolate: string[]): void {
  // Installed from an archive, as a node gets it: with its install record, so every run
  // verifies its ~6,000 files first.
  const source = join(dir, 'apply-real', 'source')
  if (realRelease(join(source, 'real', 'tags', '1.0.0')) === 0) {
    console.log('apply real: skipped (no puppet-module-* packages and not root to install them)')
    return
  }

  const modules = join(dir, 'apply-real', 'modules')
  mkdirSync(modules, {recursive: true})
  const archive = join(dir, 'apply-real', 'real.tar.gz')
  for (const args of [['pack', 'real@1.0.0', '--module-dir', source, '-o', archive], ['install', archive, '--module-dir', modules]]) {
    const result = spawnSync('node', [tools.bin, ...args], {encoding: 'utf8'})
    if (result.status !== 0) throw new Error(`localpuppet ${args.join(' ')} exited ${result.status}: ${result.stderr}`)
  }

  const input = join(dir, 'apply-real', 'input.yaml')
  writeFileSync(input, 'app: real@1.0.0\nclasses:\n  ntp:\n  memcached:\n')
  const args = [tools.bin, 'apply', input, '--module-dir', modules, '--state-dir', join(dir, 'apply-real', 'state')]
  const first = spawnSync('node', [...args, '--json', '--', '--noop', ...isolate], {encoding: 'utf8'})
  if (first.status !== 0 && first.status !== 2) throw new Error(`apply on the real release exited ${first.status}: ${first.stderr}`)
  const [puppet, ...puppetArgs] = JSON.parse(first.stdout).command as string[]
  console.log(`apply real: ${readdirSync(join(modules, 'real', 'tags', '1.0.0')).length - 1} modules (installed, so verified before each run), classes ntp and memcached, --noop`)
  tools.compare('apply / puppet', 1.05, () => tools.time('node', [...args, '--', '--noop', ...isolate]), () => tools.time(puppet, puppetArgs), Math.max(3, Math.floor(tools.rounds / 2)))
  chmodTree(join(dir, 'apply-real'))
  rmSync(join(dir, 'apply-real'), {recursive: true, force: true})
}
