import {createHash} from 'node:crypto'
import type {Stats} from 'node:fs'
import {stat} from 'node:fs/promises'
import {isAbsolute, join, normalize} from 'node:path'

import {PuppetUnavailableError} from '../errors.js'
import {startChild} from '../util/child.js'
import {writeFileAtomic} from '../util/atomic-write.js'
import {readTrustedCache as readTrustedCacheFile} from '../util/trusted-cache.js'

/** Where Puppet keeps the locks that Puppet-aware tooling looks at. */
export interface PuppetLockPaths {
  /** Exists (holding a pid) while a catalog is being applied. */
  catalogRun: string
  /** Exists (holding `{"disabled_message": ...}`) after `puppet agent --disable`. */
  disabled: string
}

/** Settings given on the command line that move those files. */
const PATH_SETTINGS = new Set(['confdir', 'config', 'vardir', 'statedir', 'agent_catalog_run_lockfile', 'agent_disabled_lockfile'])

/** The arguments among `-- PUPPET_ARGS` that change where Puppet's state lives. */
export function pathSettingArgs(args: string[]): string[] {
  const kept: string[] = []
  for (let i = 0; i < args.length; i++) {
    const match = /^--([a-z_]+)(=.*)?$/.exec(args[i])
    if (!match || !PATH_SETTINGS.has(match[1])) continue
    if (match[2] !== undefined) kept.push(args[i])
    else if (i + 1 < args.length) kept.push(args[i], args[++i])
  }

  return kept
}

/**
 * Asks Puppet itself where its lock files are (`puppet config print`), honouring
 * puppet.conf and the path settings among `-- PUPPET_ARGS`. Puppet takes about a second
 * to answer, so the answer is kept in the state directory, keyed by the puppet
 * executable, the config files and those arguments. Runs `puppet`: callers judge it first
 * (util/trusted-path.ts), as apply's plan does.
 */
export async function puppetLockPaths(puppet: string, args: string[], stateDir: string): Promise<PuppetLockPaths> {
  const settings = pathSettingArgs(args)
  const key = await cacheKey(puppet, settings)
  const cacheFile = join(stateDir, 'puppet-paths.json')
  const cached = await readTrustedCache(cacheFile)
  if (cached?.key === key) return cached.paths

  let out = ''
  let err = ''
  const child = startChild(puppet, ['config', 'print', 'agent_catalog_run_lockfile', 'agent_disabled_lockfile', '--render-as', 'json', ...settings], {
    onStdout: (chunk) => (out += chunk),
    onStderr: (chunk) => (err += chunk),
  })
  const exit = await child.exited
  let parsed: Record<string, string> | undefined
  try {
    parsed = JSON.parse(out.slice(out.indexOf('{'))) as Record<string, string>
  } catch {
    // Not JSON: the check below reports puppet config print's failure.
  }

  if (exit.exitCode !== 0 || !parsed?.agent_catalog_run_lockfile || !parsed.agent_disabled_lockfile) {
    throw new PuppetUnavailableError(`puppet config print failed: ${(exit.spawnError?.message ?? err.trim()) || `exit ${exit.exitCode}`}`)
  }

  const paths = {catalogRun: parsed.agent_catalog_run_lockfile, disabled: parsed.agent_disabled_lockfile}
  await writeFileAtomic(cacheFile, JSON.stringify({key, paths}) + '\n').catch(() => {})
  return paths
}

/**
 * The cache, only if it can be trusted as a source of paths that disable overwrites and
 * enable deletes: a regular file (not a link) that the effective user owns and nobody else
 * can write, holding two absolute paths. Anything else is ignored and asked again.
 */
async function readTrustedCache(path: string): Promise<{key: string; paths: PuppetLockPaths} | null> {
  const ownedByMe = (info: Stats) => info.uid === (process.geteuid?.() ?? 0) && (info.mode & 0o022) === 0
  return readTrustedCacheFile(path, 64 * 1024, ownedByMe, (bytes) => {
    const cached = JSON.parse(bytes.toString('utf8')) as {key?: unknown; paths?: Partial<PuppetLockPaths>}
    const {catalogRun, disabled} = cached?.paths ?? {}
    if (typeof cached.key !== 'string' || !isCleanAbsolute(catalogRun) || !isCleanAbsolute(disabled)) return null
    return {key: cached.key, paths: {catalogRun, disabled}}
  })
}

function isCleanAbsolute(path: unknown): path is string {
  return typeof path === 'string' && isAbsolute(path) && normalize(path) === path && !path.includes('\0')
}

async function cacheKey(puppet: string, settings: string[]): Promise<string> {
  const stamp = async (path: string) => {
    try {
      const info = await stat(path)
      return `${path}:${info.mtimeMs}:${info.size}`
    } catch {
      return `${path}:-`
    }
  }

  // Puppet's defaults differ for root and other users; a --confdir or --config names the file that counts.
  const parts = [puppet, await stamp(puppet), String(process.geteuid?.() ?? ''), ...settings]
  const named = settings.flatMap((arg, i) => {
    const [flag, value] = arg.includes('=') ? arg.split(/=(.*)/s) : [arg, settings[i + 1]]
    return flag === '--confdir' ? [join(value, 'puppet.conf')] : flag === '--config' ? [value] : []
  })
  for (const conf of [...named, '/etc/puppet/puppet.conf', '/etc/puppetlabs/puppet/puppet.conf', join(process.env.HOME ?? '/', '.puppetlabs/etc/puppet/puppet.conf')]) parts.push(await stamp(conf))
  return createHash('sha256').update(JSON.stringify(parts)).digest('hex')
}
