import {closeSync, openSync, readFileSync, readSync, realpathSync} from 'node:fs'
import {dirname, join} from 'node:path'

import {findExecutable} from '../util/find-executable.js'

/** Where Puppet's and OpenVox's own packages put the command (timers and cron do not have it on PATH). */
export const PUPPETLABS_PUPPET = '/opt/puppetlabs/bin/puppet'

/** Which Puppet: `puppet` or `openvox` and its version, or null for what neither a package nor a gem owns (a wrapper, a test double). */
export interface PuppetIdentity {
  implementation: 'puppet' | 'openvox' | null
  version: string | null
  /** The executable as run (not its real path). */
  path: string
  /** What said so: `dpkg:puppet-agent`, `gem:openvox`, or null. */
  owner: string | null
}

/** The puppet setting's value, where it was found and why. */
export interface PuppetLocation {
  /** The executable to run, or null when none was found. */
  path: string | null
  /** `setting`: the value names a path or a command other than `puppet`; `PATH`; `fallback`: PUPPETLABS_PUPPET. */
  found: 'setting' | 'PATH' | 'fallback' | 'missing'
}

/**
 * Finds the puppet to run: a path (or a command other than `puppet`) set by the flag, the
 * environment or the configuration is taken as it is (execvp's rules); plain `puppet`, the
 * default, is looked up on PATH and then at /opt/puppetlabs/bin/puppet.
 */
export function locatePuppet(command: string, env: NodeJS.ProcessEnv = process.env, fallback = PUPPETLABS_PUPPET): PuppetLocation {
  const found = findExecutable(command, env)
  if (command !== 'puppet') return {path: found, found: found === null ? 'missing' : 'setting'}
  if (found !== null) return {path: found, found: 'PATH'}
  const last = findExecutable(fallback, env)
  return last === null ? {path: null, found: 'missing'} : {path: last, found: 'fallback'}
}

/** The puppet to run, or null: see locatePuppet. */
export function findPuppet(command: string, env: NodeJS.ProcessEnv = process.env): string | null {
  return locatePuppet(command, env).path
}

/** What `config` shows of the puppet setting: the executable found, how and why, and which Puppet it is. */
export interface PuppetFound extends PuppetLocation {
  why: string
  implementation: PuppetIdentity['implementation']
  version: string | null
  owner: string | null
}

/** The puppet the setting `command` (set by `from`: a flag, a variable, file:line or built-in) finds, and why that one. */
export function explainPuppet(command: string, from: string, env: NodeJS.ProcessEnv = process.env, fallback = PUPPETLABS_PUPPET): PuppetFound {
  const location = locatePuppet(command, env, fallback)
  const origin = from === 'built-in' ? 'the default' : `set by ${from}`
  const why = {
    setting: `${command}, ${origin}`,
    PATH: `puppet, ${origin}, found on PATH`,
    fallback: `puppet, ${origin}, is not on PATH; ${fallback} is where Puppet's and OpenVox's packages put it`,
    missing: command === 'puppet' ? `puppet, ${origin}, is neither on PATH nor at ${fallback}` : `${command}, ${origin}, is not an executable`,
  }[location.found]
  const identity = location.path === null ? null : identifyPuppet(location.path)
  return {...location, why, implementation: identity?.implementation ?? null, version: identity?.version ?? null, owner: identity?.owner ?? null}
}

/** Which Puppet the setting `command` finds, as a run record keeps it (path null: none found). */
export function recordedPuppet(command: string, env: NodeJS.ProcessEnv = process.env): RecordedPuppet {
  return describePuppet(findPuppet(command, env))
}

/** The record's view of the puppet at `path`, or of none. */
export function describePuppet(path: string | null): RecordedPuppet {
  if (path === null) return {implementation: null, version: null, path: null}
  const {implementation, version} = identifyPuppet(path)
  return {implementation, version, path}
}

/** The Debian packages that ship a puppet command, in the order they are asked; the prefix names the implementation. */
const PACKAGES = ['puppet-agent', 'openvox-agent', 'puppet', 'openvox']
const DPKG_INFO = '/var/lib/dpkg/info'

const cache = new Map<string, PuppetIdentity>()

/**
 * Which Puppet an executable is, from what owns it, never from `--version` (Puppet and
 * OpenVox print the same): the Debian package whose file list names it or its real path
 * (puppet-agent and Debian's puppet are Puppet; openvox-agent is OpenVox), with the version
 * from that package's own `puppet/version.rb`; else a Ruby gem (`gems/openvox-8.19.0/bin/puppet`,
 * or a RubyGems wrapper naming its gem). Reads at most four dpkg file lists (tens of KB)
 * and one small file, once per process and executable; runs nothing.
 */
export function identifyPuppet(path: string, dpkgInfo = DPKG_INFO): PuppetIdentity {
  const key = `${dpkgInfo}\0${path}`
  let known = cache.get(key)
  if (!known) {
    known = identify(path, dpkgInfo)
    cache.set(key, known)
  }

  return known
}

function identify(path: string, dpkgInfo: string): PuppetIdentity {
  let real = path
  try {
    real = realpathSync(path)
  } catch {
    // A path that does not resolve is judged as given.
  }

  const packaged = owningPackage(new Set([path, real]), dpkgInfo)
  if (packaged) return {implementation: implementationOf(packaged.name), version: packaged.versionFile ? versionIn(packaged.versionFile) : null, path, owner: `dpkg:${packaged.name}`}
  const gem = /\/gems\/(puppet|openvox)-(\d+\.\d+\.\d+[^/]*)\/bin\/puppet$/.exec(real)
  if (gem) return {implementation: implementationOf(gem[1]), version: versionIn(join(dirname(dirname(real)), 'lib', 'puppet', 'version.rb')) ?? gem[2], path, owner: `gem:${gem[1]}`}
  const wrapper = rubygemsWrapper(real)
  if (wrapper) return {implementation: implementationOf(wrapper), version: null, path, owner: `gem:${wrapper}`}
  return {implementation: null, version: null, path, owner: null}
}

/**
 * Whose Puppet library a puppet/version.rb is (the one a Ruby process loaded): the Debian
 * package whose file list names it, or the gem whose directory holds it; null for neither.
 */
export function identifyLibrary(versionFile: string, dpkgInfo = DPKG_INFO): {implementation: 'puppet' | 'openvox'; owner: string} | null {
  const packaged = owningPackage(new Set([versionFile]), dpkgInfo)
  if (packaged) return {implementation: implementationOf(packaged.name), owner: `dpkg:${packaged.name}`}
  const gem = /\/gems\/(puppet|openvox)-\d+\.\d+\.\d+[^/]*\/lib\/puppet\/version\.rb$/.exec(versionFile)
  return gem ? {implementation: implementationOf(gem[1]), owner: `gem:${gem[1]}`} : null
}

/** The first of PACKAGES whose dpkg file list names one of `names`, with the puppet/version.rb it ships. */
function owningPackage(names: Set<string>, dpkgInfo: string): {name: string; versionFile: string | undefined} | null {
  for (const name of PACKAGES) {
    let list: string
    try {
      list = readFileSync(join(dpkgInfo, `${name}.list`), 'utf8')
    } catch {
      continue
    }

    const files = list.split('\n')
    if (files.some((file) => names.has(file))) return {name, versionFile: files.find((file) => file.endsWith('/puppet/version.rb'))}
  }

  return null
}

function implementationOf(name: string): 'puppet' | 'openvox' {
  return name.startsWith('openvox') ? 'openvox' : 'puppet'
}

/** PUPPETVERSION from a puppet/version.rb, or null. */
function versionIn(file: string): string | null {
  try {
    return /PUPPETVERSION\s*=\s*['"]([^'"]+)['"]/.exec(readFileSync(file, 'utf8'))?.[1] ?? null
  } catch {
    return null
  }
}

/** The gem a RubyGems bin wrapper loads its puppet from (`Gem.bin_path("openvox", "puppet", ...)`), or null. */
function rubygemsWrapper(file: string): string | null {
  try {
    const handle = openSync(file, 'r')
    const buffer = Buffer.alloc(4096)
    let head: string
    try {
      head = buffer.subarray(0, readSync(handle, buffer, 0, buffer.length, 0)).toString('latin1')
    } finally {
      closeSync(handle)
    }

    return /Gem\.(?:activate_)?bin_path\(\s*['"](puppet|openvox)['"]/.exec(head)?.[1] ?? null
  } catch {
    return null
  }
}

/** Which Puppet an attempt ran or would have run: implementation and version from the package or gem that owns `path`. */
export interface RecordedPuppet {
  implementation: 'puppet' | 'openvox' | null
  version: string | null
  path: string | null
}
