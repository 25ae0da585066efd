/**
 * The incremental delivery benchmark (BENCH=incremental): a node that has a release and
 * gets the next one, on Debian's Puppet modules (/usr/share/puppet/modules, dereferenced)
 * as one tag, signed, published, served by Debian's nginx on 127.0.0.1. Whole processes,
 * interleaved, medians, with the bytes each tool downloaded (nginx's access log).
 *
 * The release is issue 40's size: the modules sorted by name, taken while their files add
 * up to at most 3,864 (BENCH_INCREMENTAL_FILES); with the packages bin/setup --tests
 * installs, that is alternatives to nova, 53 modules, exactly 3,864 files (and the tag's
 * manifest.yaml).
 *
 *   one file / r10k     1.0.1 differs from 1.0.0 by one line of one manifest: `localpuppet
 *                       fetch` with 1.0.0 installed vs r10k moving a Puppetfile from tag
 *                       1.0.0 to 1.0.1 (warm cache, one git repository per module served
 *                       over git's dumb HTTP by the same nginx); target <= 0.5, and <= 10%
 *                       of the archive downloaded
 *   10% / r10k          1.1.0 differs from 1.0.0 in every tenth file; target <= 1.0
 *   ... / g10k          the same against g10k, for the record
 *   first / main        a first fetch into an empty module directory (nothing in common:
 *                       the archive) vs the same fetch by /work/main's build (today's),
 *                       when there is one; target: no slower (within noise)
 *
 * r10k and g10k are Debian packages (apt-get install r10k g10k): each is skipped, saying
 * so, when missing.
 */
import {execFileSync, spawnSync} from 'node:child_process'
import {appendFileSync, cpSync, existsSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {fileURLToPath} from 'node:url'

import {startNginx} from '../helpers/nginx.js'
import {farmBench, haveFarmBench} from './farm.js'

const BIN = fileURLToPath(new URL('../../bin/run.js', import.meta.url))
const MAIN_BIN = '/work/main/bin/run.js'
const DEBIAN_MODULES = '/usr/share/puppet/modules'
/**
 * A node runs each release it gets, and the check before a run keeps the files' stat keys
 * (verify/verified-cache.ts), which the next fetch's sharing relies on instead of reading
 * them again: before each timed fetch, `releases` checks the installed tags (not timed).
 * BENCH_INCREMENTAL_CHECKED=0: never checked, every shared file read back.
 */
const CHECKED = process.env.BENCH_INCREMENTAL_CHECKED !== '0'
/** Issue 40's release: 3,864 files. */
const RELEASE_FILES = Number(process.env.BENCH_INCREMENTAL_FILES ?? 3864)

type Time = (file: string, args: string[], env?: NodeJS.ProcessEnv, before?: () => void) => number
type Compare = (name: string, target: number | null, a: () => number, b: () => number, rounds?: number) => number

const GIT_ENV = {...process.env, GIT_AUTHOR_NAME: 'bench', GIT_AUTHOR_EMAIL: 'b@x', GIT_COMMITTER_NAME: 'bench', GIT_COMMITTER_EMAIL: 'b@x'}

/** Every file under a directory, relative, sorted. */
function listFiles(root: string, at = ''): string[] {
  const found: string[] = []
  for (const entry of readdirSync(join(root, at), {withFileTypes: true})) {
    const path = at === '' ? entry.name : `${at}/${entry.name}`
    if (entry.isDirectory()) found.push(...listFiles(root, path))
    else if (entry.isFile()) found.push(path)
  }

  return found.sort()
}

/** Files under a directory, following links (Debian's modules are links to modules.available/). */
function countFiles(path: string): number {
  let count = 0
  for (const entry of readdirSync(path)) {
    const info = statSync(join(path, entry))
    if (info.isDirectory()) count += countFiles(join(path, entry))
    else if (info.isFile()) count++
  }

  return count
}

/** Debian's modules sorted by name, taken while their files add up to at most `limit`. */
function pickModules(limit: number): {names: string[]; available: number} {
  const all = readdirSync(DEBIAN_MODULES).filter((name) => /^[a-z][a-z0-9_]*$/.test(name)).sort()
  const names: string[] = []
  let total = 0
  for (const name of all) {
    const files = countFiles(join(DEBIAN_MODULES, name))
    if (total + files > limit) break
    names.push(name)
    total += files
  }

  return {names, available: all.length}
}

/**
 * The trees: 1.0.0, then `count` tags of each kind, each fetched once: 1.0.1, 1.0.2, ... (one
 * line of one manifest differs from 1.0.0, and from each other) and 1.1.0, 1.1.1, ... (every
 * tenth file differs). A new tag each round, none removed in between: a tag removed just
 * before it is fetched again made each mkdir of the next install scan the inodes just freed
 * (ext4 without a journal, as here, does not reuse an inode freed in the last 5 s, 305 s while
 * its inode table is dirty, and looks for another bit by bit: 70% of the process's CPU in
 * perf), which no node pays that gets the next release.
 */
function makeTrees(src: string, names: string[], count: number): {files: number; changedTen: number; oneLine: string[]; tenPercent: string[]} {
  const base = join(src, 'site', 'tags', '1.0.0')
  for (const name of names) cpSync(join(DEBIAN_MODULES, name), join(base, name), {recursive: true, dereference: true})
  writeFileSync(join(base, 'manifest.yaml'), 'modulepath: []\n')
  const files = listFiles(base)
  const manifest = files.find((path) => path.endsWith('/manifests/init.pp'))!
  const ten = files.filter((_, i) => i % 10 === 5)
  const oneLine = Array.from({length: count}, (_, i) => `1.0.${i + 1}`)
  const tenPercent = Array.from({length: count}, (_, i) => `1.1.${i}`)
  for (const tag of [...oneLine, ...tenPercent]) cpSync(base, join(src, 'site', 'tags', tag), {recursive: true})
  for (const tag of oneLine) appendFileSync(join(src, 'site', 'tags', tag, manifest), `# ${tag}\n`)
  for (const tag of tenPercent) for (const path of ten) appendFileSync(join(src, 'site', 'tags', tag, path), `\n# ${tag}\n`)
  return {files: files.length, changedTen: ten.length, oneLine, tenPercent}
}

/** Bytes nginx sent since the log was `from` bytes long, and the log's length now. */
function bytesSince(log: string, from: number): {bytes: number; requests: number; to: number} {
  const text = existsSync(log) ? readFileSync(log) : Buffer.alloc(0)
  const lines = text.subarray(from).toString('utf8').split('\n').filter(Boolean)
  return {bytes: lines.reduce((sum, line) => sum + Number(line.split(' ')[0]), 0), requests: lines.length, to: text.length}
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}

/**
 * The same pair timed by farm-bench, whole processes in turn: localpuppet fetching the next
 * tag of the kind (never checked before: every shared file read back), against r10k moving
 * its Puppetfile between 1.0.0 and `tag`, each run one way (either way the same files change).
 */
function farmAgainstR10k(work: string, label: string, tag: string, next: () => string, fetchArgs: (tag: string, modules: string) => string[], rounds: number): void {
  const list = join(work, `farm-${tag}.tags`)
  writeFileSync(list, Array.from({length: rounds + 1}, () => next()).join('\n') + '\n')
  const fetch = fetchArgs('TAG', join(work, 'node')).join(' ').replace('site/tags/TAG', 'site/tags/$T')
  writeFileSync(join(work, `farm-fetch-${tag}.sh`), `T=$(head -n 1 ${list}); sed -i 1d ${list}\nexec node ${fetch} >/dev/null 2>&1\n`)
  const state = join(work, 'r10k.state')
  execFileSync('cp', [join(work, 'Puppetfile-1.0.0'), join(work, 'Puppetfile')])
  execFileSync('r10k', ['puppetfile', 'install', '--puppetfile', join(work, 'Puppetfile'), '--moduledir', join(work, 'r10k'), '--config', join(work, 'r10k.yaml')], {stdio: 'ignore'})
  writeFileSync(state, '1.0.0\n')
  writeFileSync(
    join(work, `farm-r10k-${tag}.sh`),
    `if [ "$(cat ${state})" = 1.0.0 ]; then T=${tag}; else T=1.0.0; fi; echo $T > ${state}; cp ${work}/Puppetfile-$T ${work}/Puppetfile\n` +
      `exec r10k puppetfile install --puppetfile ${work}/Puppetfile --moduledir ${work}/r10k --config ${work}/r10k.yaml >/dev/null 2>&1\n`,
  )
  console.log(`${label} / r10k, farm-bench (the fetch never checked before: shared files read back):`)
  farmBench(`exec sh ${join(work, `farm-fetch-${tag}.sh`)}`, `exec sh ${join(work, `farm-r10k-${tag}.sh`)}`, rounds)
}

export async function incrementalBench(dir: string, time: Time, compare: Compare, rounds: number): Promise<void> {
  const {names, available} = existsSync(DEBIAN_MODULES) ? pickModules(RELEASE_FILES) : {names: [], available: 0}
  if (names.length === 0) {
    console.log('incremental: skipped (no Debian Puppet modules under /usr/share/puppet/modules: bin/setup --tests installs some)')
    return
  }

  const haveR10k = spawnSync('sh', ['-c', 'command -v r10k'], {stdio: 'ignore'}).status === 0
  const haveG10k = spawnSync('sh', ['-c', 'command -v g10k'], {stdio: 'ignore'}).status === 0
  const work = join(dir, 'incremental')
  const src = join(work, 'src')
  const farm = haveR10k && haveFarmBench()
  // Tags fetched of each kind: one measured for its bytes, then a warm-up and the rounds against each tool (and farm-bench's).
  const {files, changedTen, oneLine, tenPercent} = makeTrees(src, names, 1 + (Math.max(1, Number(haveR10k) + Number(haveG10k)) + Number(farm)) * (rounds + 1))
  execFileSync('openssl', ['genpkey', '-algorithm', 'ed25519', '-out', join(work, 'key.pem')])
  execFileSync('openssl', ['pkey', '-in', join(work, 'key.pem'), '-pubout', '-out', join(work, 'key.pub.pem')])
  const www = join(work, 'www')
  const repo = join(www, 'repo')
  const archives = ['1.0.0', ...oneLine, ...tenPercent].map((tag) => {
    const archive = join(work, `site-${tag}.tar.gz`)
    execFileSync('node', [BIN, 'pack', `site/tags/${tag}`, '--module-dir', src, '-o', archive, '--sign', join(work, 'key.pem')])
    return archive
  })
  execFileSync('node', [BIN, 'publish', ...archives, '--repo', repo, '--sign', join(work, 'key.pem')])
  const archiveBytes = statSync(archives[1]).size
  console.log(`incremental: ${names.length} of ${available} Debian Puppet modules (${names[0]} to ${names.at(-1)}), ${files} files, archive ${(archiveBytes / 1024 / 1024).toFixed(2)} MiB; 1.0.1 to ${oneLine.at(-1)}: one line of one manifest; 1.1.0 to ${tenPercent.at(-1)}: ${changedTen} files (10%); a new tag each round${CHECKED ? ', the installed tags checked before each (as before a run: stat keys kept)' : ', never checked (every shared file read back)'}; median of ${rounds}`)

  // One bare git repository per module (tags 1.0.0, 1.0.1, 1.1.0), served by git's dumb HTTP protocol.
  if (haveR10k || haveG10k) {
    for (const name of names) {
      const checkout = join(work, 'git-work', name)
      const git = (...args: string[]) => execFileSync('git', ['-C', checkout, ...args], {stdio: 'ignore', env: GIT_ENV})
      mkdirSync(checkout, {recursive: true})
      git('init', '-q')
      for (const tag of ['1.0.0', '1.0.1', '1.1.0']) {
        rmSync(join(checkout, 'tree'), {recursive: true, force: true})
        for (const entry of readdirSync(checkout)) if (entry !== '.git') rmSync(join(checkout, entry), {recursive: true, force: true})
        cpSync(join(src, 'site', 'tags', tag, name), checkout, {recursive: true})
        git('add', '-A')
        git('commit', '-q', '--allow-empty', '-m', tag)
        git('tag', tag)
      }

      const bare = join(www, 'git', `${name}.git`)
      execFileSync('git', ['clone', '-q', '--bare', checkout, bare], {stdio: 'ignore'})
      execFileSync('git', ['-C', bare, 'update-server-info'], {stdio: 'ignore'})
    }
  }

  const log = join(work, 'access.log')
  const nginx = await startNginx(www, join(work, 'nginx'), {accessLog: log})
  try {
    const source = `${nginx.url}/repo`
    const fetchArgs = (tag: string, modules: string) => [BIN, 'fetch', `site/tags/${tag}`, '--source', source, '--trust', join(work, 'key.pub.pem'), '--module-dir', modules]
    const fresh = (path: string) => {
      spawnSync('chmod', ['-R', 'u+w', path])
      rmSync(path, {recursive: true, force: true})
      mkdirSync(path, {recursive: true})
    }

    // A node with 1.0.0 installed (from its archive).
    const node = join(work, 'node')
    fresh(node)
    execFileSync('node', fetchArgs('1.0.0', node))
    /** Each tag of a kind in turn, each fetched once. */
    const series = (tags: string[]) => {
      const left = [...tags]
      return () => {
        if (left.length === 0) throw new Error(`incremental: more fetches than tags made (${tags.length})`)
        return left.shift()!
      }
    }

    /** The installed tags checked as before a run, once their files are old enough for keys (two seconds). */
    let fetchedAt = 0
    const checked = () => {
      if (!CHECKED) return
      const wait = fetchedAt + 2100 - Date.now()
      if (wait > 0) execFileSync('sleep', [String(wait / 1000)])
      execFileSync('node', [BIN, 'releases', '--module-dir', node], {stdio: 'ignore'})
    }

    const fetchNext = (next: () => string) => {
      const ms = time('node', fetchArgs(next(), node), {}, checked)
      fetchedAt = Date.now()
      return ms
    }

    const nextOneLine = series(oneLine)
    const nextTenPercent = series(tenPercent)
    /** One fetch of the tag measured for its bytes (fetch --json and nginx's log) and what it shared. */
    const measured = (tag: string) => {
      checked()
      const from = bytesSince(log, 0).to
      const out = JSON.parse(execFileSync('node', [...fetchArgs(tag, node), '--json'], {encoding: 'utf8'}))
      fetchedAt = Date.now()
      const sent = bytesSince(log, from)
      const release = out.releases[0]
      const share = (100 * sent.bytes) / archiveBytes
      console.log(`localpuppet fetch ${tag}: ${release.delivery}, ${release.files.shared} files shared, ${release.files.written} written, ${release.files.downloaded} downloaded; ${sent.bytes} bytes in ${sent.requests} requests (${share.toFixed(1)}% of the archive)`)
      return share
    }

    const shareOne = measured(nextOneLine())
    console.log(`one file: bytes downloaded ${shareOne.toFixed(1)}% of the archive (target <= 10%, ${shareOne <= 10 ? 'ok' : 'OVER TARGET'})`)
    measured(nextTenPercent())

    // r10k and g10k: a Puppetfile moved from 1.0.0 to the new tag, warm caches (the move back is not timed).
    const puppetfile = (tag: string, path = join(work, 'Puppetfile')) => {
      writeFileSync(path, names.map((name) => `mod '${name}', :git => '${nginx.url}/git/${name}.git', :tag => '${tag}'`).join('\n') + '\n')
    }

    for (const tag of ['1.0.0', '1.0.1', '1.1.0']) puppetfile(tag, join(work, `Puppetfile-${tag}`))

    const tools = [
      haveR10k && {
        name: 'r10k',
        run: (tag: string) => {
          puppetfile(tag)
          return time('r10k', ['puppetfile', 'install', '--puppetfile', join(work, 'Puppetfile'), '--moduledir', join(work, 'r10k'), '--config', join(work, 'r10k.yaml')])
        },
      },
      haveG10k && {
        name: 'g10k',
        run: (tag: string) => {
          puppetfile(tag)
          return time('g10k', ['-puppetfile', '-puppetfilelocation', join(work, 'Puppetfile'), '-moduledir', join(work, 'g10k'), '-cachedir', join(work, 'g10k-cache'), '-quiet'])
        },
      },
    ].filter((tool): tool is {name: string; run: (tag: string) => number} => Boolean(tool))
    writeFileSync(join(work, 'r10k.yaml'), `cachedir: '${join(work, 'r10k-cache')}'\n`)
    for (const name of ['r10k', 'g10k'].filter((tool) => !tools.some((t) => t.name === tool))) console.log(`${name}: skipped (not installed: apt-get install ${name})`)

    for (const [label, tag, next, target] of [['one file', '1.0.1', nextOneLine, 0.5], ['10%', '1.1.0', nextTenPercent, 1.0]] as const) {
      for (const tool of tools) {
        tool.run('1.0.0')
        const from = bytesSince(log, 0).to
        tool.run(tag)
        const sent = bytesSince(log, from)
        console.log(`${tool.name} ${tag}: ${sent.bytes} bytes in ${sent.requests} requests`)
        compare(
          `${label} / ${tool.name}`,
          tool.name === 'r10k' ? target : null,
          () => fetchNext(next),
          () => {
            tool.run('1.0.0')
            return tool.run(tag)
          },
          rounds,
        )
      }

      if (farm) farmAgainstR10k(work, label, tag, next, fetchArgs, rounds)
      if (tools.length === 0) {
        const ms: number[] = []
        ms.push(fetchNext(next))
        for (let i = 0; i < rounds; i++) ms.push(fetchNext(next))
        ms.shift()
        console.log(`${label}: localpuppet fetch ${median(ms).toFixed(0)} ms (no r10k to compare with)`)
      }
    }

    // A first install: nothing in common, the archive, as today's build does it. Each into a new
    // empty directory, none removed in between (see makeTrees: removing the last one first made
    // each install scan the inodes just freed, several times slower than a node's first install).
    let firsts = 0
    const empty = () => {
      const path = join(work, 'first', String(firsts++))
      mkdirSync(path, {recursive: true})
      return path
    }

    if (existsSync(MAIN_BIN) && existsSync('/work/main/dist')) {
      compare('first / main', 1.1, () => time('node', fetchArgs('1.0.0', empty())), () => time('node', [MAIN_BIN, ...fetchArgs('1.0.0', empty()).slice(1)]), rounds)
    } else {
      const ms: number[] = []
      for (let i = 0; i < rounds; i++) ms.push(time('node', fetchArgs('1.0.0', empty())))
      console.log(`first install: ${median(ms).toFixed(0)} ms (no /work/main build to compare with)`)
    }
  } finally {
    await nginx.stop()
    spawnSync('chmod', ['-R', 'u+w', work])
  }
}
