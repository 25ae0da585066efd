/**
 * The fetch benchmark (BENCH=fetch), on a realistic release: every module Debian packages
 * (puppet-module-*, under /usr/share/puppet/modules; installed here when missing) in one
 * tag, packed, signed and published to a repository that Debian's nginx serves on
 * 127.0.0.1.
 *
 *   fetch / curl+tar      localpuppet fetch into an empty module dir vs `curl -o` plus
 *                         `tar -xzf` of the same archive from the same server
 *   warm fetch / curl     fetch when the tag is already installed (the signed index read,
 *                         nothing to download) vs one curl of the index and its signature;
 *                         its absolute time is reported too (target <= 0.15 s, issue 25)
 *   fetch / r10k, g10k    the same modules delivered by r10k and by g10k from local git
 *                         repositories (one per module, tag 1.0.0) named in a Puppetfile,
 *                         cold caches, vs fetch (each skipped, saying so, when not installed)
 */
import {execFileSync, spawnSync} from 'node:child_process'
import {cpSync, existsSync, mkdirSync, readdirSync, rmSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {fileURLToPath} from 'node:url'

import {startNginx} from '../helpers/nginx.js'

const BIN = fileURLToPath(new URL('../../bin/run.js', import.meta.url))
const DEBIAN_MODULES = '/usr/share/puppet/modules'
/** Enough of Debian's modules for a realistic site when none are installed. */
const PACKAGES = [
  'stdlib', 'apache', 'apt', 'concat', 'mysql', 'postgresql', 'rabbitmq', 'firewall', 'inifile', 'ntp', 'haproxy', 'mongodb', 'rsync', 'vcsrepo', 'xinetd',
].map((name) => `puppet-module-puppetlabs-${name}`).concat(['keystone', 'nova', 'neutron', 'glance', 'cinder', 'horizon', 'heat', 'swift', 'openstacklib', 'oslo', 'placement', 'ceph'].map((name) => `puppet-module-${name}`))

type Time = (file: string, args: string[], env?: NodeJS.ProcessEnv, before?: () => void) => number
type Compare = (name: string, target: number | null, a: () => number, b: () => number, rounds?: number) => number

function ensureDebianModules(): string[] {
  const valid = () => (existsSync(DEBIAN_MODULES) ? readdirSync(DEBIAN_MODULES).filter((name) => /^[a-z][a-z0-9_]*$/.test(name)) : [])
  if (valid().length < 20) {
    console.log(`fetch: installing ${PACKAGES.length} puppet-module-* packages for a realistic release`)
    execFileSync('apt-get', ['install', '-y', '-q', '-o', 'DPkg::Lock::Timeout=600', ...PACKAGES], {stdio: 'inherit'})
  }

  return valid()
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}

export async function fetchBench(dir: string, time: Time, compare: Compare, rounds: number): Promise<void> {
  const names = ensureDebianModules()
  const work = join(dir, 'fetch')
  const modules = join(work, 'modules')
  const release = join(modules, 'site', 'tags', '1.0.0')
  for (const name of names) cpSync(join(DEBIAN_MODULES, name), join(release, name), {recursive: true, dereference: true})
  writeFileSync(join(release, 'manifest.yaml'), 'modulepath: []\n')
  execFileSync('openssl', ['genpkey', '-algorithm', 'ed25519', '-out', join(work, 'key.pem')])
  execFileSync('openssl', ['pkey', '-in', join(work, 'key.pem'), '-pubout', '-out', join(work, 'key.pub.pem')])
  const archive = join(work, 'site-1.0.0.tar.gz')
  execFileSync('node', [BIN, 'pack', 'site/tags/1.0.0', '--module-dir', modules, '-o', archive, '--sign', join(work, 'key.pem')])
  const repo = join(work, 'repo')
  execFileSync('node', [BIN, 'publish', archive, '--repo', repo, '--sign', join(work, 'key.pem')])
  const files = Number(execFileSync('sh', ['-c', `find '${release}' -type f | wc -l`], {encoding: 'utf8'}).trim())
  const bytes = Number(execFileSync('stat', ['-c', '%s', archive], {encoding: 'utf8'}).trim())
  console.log(`fetch: ${names.length} Debian Puppet modules, ${files} files, archive ${(bytes / 1024 / 1024).toFixed(1)} MiB, median of ${rounds}`)

  const nginx = await startNginx(repo, join(work, 'nginx'))
  try {
    const fresh = (path: string) => () => {
      rmSync(path, {recursive: true, force: true})
      mkdirSync(path, {recursive: true})
    }

    const target = join(work, 'fetched')
    const untarred = join(work, 'untarred')
    const download = join(work, 'download.tar.gz')
    const fetchOnce = () => time('node', [BIN, 'fetch', 'site/tags/1.0.0', '--source', nginx.url, '--trust', join(work, 'key.pub.pem'), '--module-dir', target], {}, fresh(target))
    compare(
      'fetch / curl+tar',
      1.5,
      fetchOnce,
      () => time('sh', ['-c', `curl -sf -o '${download}' '${nginx.url}/archives/site/site-1.0.0.tar.gz' && tar -xzf '${download}' -C '${untarred}'`], {}, fresh(untarred)),
      rounds,
    )

    // Warm: `target` holds the tag from the last cold fetch; only the signed index is read.
    const warmArgs = [BIN, 'fetch', 'site/tags/1.0.0', '--source', nginx.url, '--trust', join(work, 'key.pub.pem'), '--module-dir', target]
    const warm: number[] = []
    compare(
      'warm fetch / curl index',
      null,
      () => {
        const ms = time('node', warmArgs)
        warm.push(ms)
        return ms
      },
      () => time('curl', ['-sf', '-o', '/dev/null', `${nginx.url}/index.json`, '-o', '/dev/null', `${nginx.url}/index.json.sig`]),
      Math.max(rounds, 9),
    )
    // The first was compare's warm-up.
    const warmSeconds = median(warm.slice(1)) / 1000
    console.log(`warm fetch: ${warmSeconds.toFixed(3)} s, nothing to download (target <= 0.15 s, ${warmSeconds <= 0.15 ? 'ok' : 'OVER TARGET'})`)

    // r10k and g10k are Debian packages a machine may not have: each is skipped, saying so.
    const missing = ['r10k', 'g10k'].filter((tool) => spawnSync('sh', ['-c', `command -v ${tool}`], {stdio: 'ignore'}).status !== 0)
    if (missing.length === 2) {
      console.log('fetch / r10k, fetch / g10k: skipped (neither r10k nor g10k is installed: apt-get install r10k g10k)')
      return
    }

    // One git repository per module, tagged 1.0.0, and a Puppetfile naming them all.
    const git = join(work, 'git')
    const puppetfile = join(work, 'Puppetfile')
    const lines: string[] = []
    for (const name of names) {
      const repoDir = join(git, name)
      cpSync(join(release, name), repoDir, {recursive: true})
      const run = (...args: string[]) => execFileSync('git', ['-C', repoDir, ...args], {stdio: 'ignore', env: {...process.env, GIT_AUTHOR_NAME: 'bench', GIT_AUTHOR_EMAIL: 'b@x', GIT_COMMITTER_NAME: 'bench', GIT_COMMITTER_EMAIL: 'b@x'}})
      run('init', '-q')
      run('add', '-A')
      run('commit', '-q', '-m', 'release')
      run('tag', '1.0.0')
      lines.push(`mod '${name}', :git => '${repoDir}', :tag => '1.0.0'`)
    }

    writeFileSync(puppetfile, lines.join('\n') + '\n')
    const r10kDir = join(work, 'r10k')
    const r10kCache = join(work, 'r10k-cache')
    writeFileSync(join(work, 'r10k.yaml'), `cachedir: '${r10kCache}'\n`)
    const coldR10k = () => {
      fresh(r10kDir)()
      rmSync(r10kCache, {recursive: true, force: true})
    }

    const r10kRounds = Math.max(3, Math.floor(rounds / 2))
    if (missing.includes('r10k')) console.log('fetch / r10k: skipped (r10k is not installed)')
    else compare('fetch / r10k', null, fetchOnce, () => time('r10k', ['puppetfile', 'install', '--puppetfile', puppetfile, '--moduledir', r10kDir, '--config', join(work, 'r10k.yaml')], {}, coldR10k), r10kRounds)

    const g10kDir = join(work, 'g10k')
    const g10kCache = join(work, 'g10k-cache')
    const coldG10k = () => {
      fresh(g10kDir)()
      rmSync(g10kCache, {recursive: true, force: true})
    }

    if (missing.includes('g10k')) console.log('fetch / g10k: skipped (g10k is not installed)')
    else compare('fetch / g10k', null, fetchOnce, () => time('g10k', ['-puppetfile', '-puppetfilelocation', puppetfile, '-moduledir', g10kDir, '-cachedir', g10kCache, '-quiet'], {}, coldG10k), r10kRounds)
    const count = (path: string) => spawnSync('sh', ['-c', `find '${path}' -type f -not -path '*/.git/*' | wc -l`], {encoding: 'utf8'}).stdout.trim()
    console.log(`fetch: files delivered: fetch ${count(join(target, 'site'))}, r10k ${count(r10kDir)}, g10k ${count(g10kDir)}`)
  } finally {
    await nginx.stop()
  }
}
