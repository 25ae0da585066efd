import {randomBytes} from 'node:crypto'
import {mkdir, writeFile} from 'node:fs/promises'
import {join} from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'

import type {ExecutionContext} from 'ava'
import {execa} from 'execa'

/**
 * App names no other test run uses: tests install into the machine's real dpkg database,
 * which parallel runs share. Letters first, no "-" (so they map to package names as is).
 */
export function uniqueApps<const T extends string[]>(...roles: T): {[K in keyof T]: string} {
  const id = randomBytes(4).toString('hex')
  return roles.map((role) => `lpt${role}${id}`) as {[K in keyof T]: string}
}

export interface DpkgResult {
  exitCode: number
  stdout: string
  stderr: string
}

/**
 * dpkg (or dpkg-query, apt-get) on the real system, waiting while another package manager
 * holds dpkg's lock (other tests, other helpers): dpkg itself has no wait option.
 */
export async function dpkg(args: string[], file = 'dpkg', env: Record<string, string> = {}): Promise<DpkgResult> {
  for (let attempt = 0; ; attempt++) {
    const result = await execa(file, args, {reject: false, env: {LC_ALL: 'C', ...env}})
    const output = `${result.stderr}\n${result.stdout}`
    if (result.exitCode !== 0 && /lock/i.test(output) && /locked|Could not get lock|Unable to acquire|Unable to lock/i.test(output) && attempt < 600) {
      await sleep(1000)
      continue
    }

    return {exitCode: result.exitCode ?? -1, stdout: String(result.stdout), stderr: String(result.stderr)}
  }
}

/**
 * Purges every package of these apps when the test ends, pass or fail, whatever state
 * it was left in, so nothing stays in the machine's dpkg database.
 */
export function purgeAfter(t: ExecutionContext, apps: string[]): void {
  t.teardown(async () => {
    const listed = await dpkg(['-W', '-f', '${Package} ${db:Status-Abbrev}\n', ...apps.map((app) => `localpuppet-${app}-*`)], 'dpkg-query')
    const names = listed.stdout.split('\n').map((line) => line.split(' ')).filter(([name, status]) => name && status && status !== 'un').map(([name]) => name)
    if (names.length === 0) return
    const result = await dpkg(['--purge', ...names])
    if (result.exitCode !== 0) console.error(`purging ${names.join(' ')}: ${result.stderr}`)
  })
}

/** Packages of these apps that are (even partly) installed: any state but "not installed". */
export async function knownPackages(apps: string[]): Promise<string[]> {
  const result = await dpkg(['-W', '-f', '${Package} ${db:Status-Abbrev}\n', ...apps.map((app) => `localpuppet-${app}-*`)], 'dpkg-query')
  return result.stdout
    .split('\n')
    .map((line) => line.split(' '))
    .filter(([name, status]) => name && status && status[1] !== 'n')
    .map(([name]) => name)
}

/**
 * A flat apt repository (apt-ftparchive) of the given .deb files and an apt configuration
 * of its own (APT_CONFIG): its sources, lists, cache and configuration parts live in the
 * test's directory, so the machine's own apt setup is neither read nor changed. dpkg's
 * status is the real one: packages install into the real system.
 */
export async function localAptRepository(dir: string, debs: string[], options: {trusted?: boolean} = {}): Promise<{env: Record<string, string>; repo: string; update: () => Promise<DpkgResult>}> {
  const repo = join(dir, 'repo')
  await mkdir(repo, {recursive: true})
  for (const deb of debs) await execa('cp', [deb, repo])
  const packages = await execa('apt-ftparchive', ['packages', '.'], {cwd: repo})
  await writeFile(join(repo, 'Packages'), packages.stdout + '\n')
  const release = await execa('apt-ftparchive', ['release', '.'], {cwd: repo})
  await writeFile(join(repo, 'Release'), release.stdout + '\n')

  const apt = join(dir, 'apt')
  for (const sub of ['sources.list.d', 'apt.conf.d', 'preferences.d', 'lists/partial', 'cache/archives/partial', 'state']) await mkdir(join(apt, sub), {recursive: true})
  // trusted=yes: no signature asked of the Release file (apt still checks every hash in it).
  await writeFile(join(apt, 'sources.list'), `deb ${options.trusted === false ? '' : '[trusted=yes] '}file:${repo} ./\n`)
  const conf = [
    `Dir::Etc::sourcelist "${apt}/sources.list";`,
    `Dir::Etc::sourceparts "${apt}/sources.list.d";`,
    `Dir::Etc::parts "${apt}/apt.conf.d";`,
    `Dir::Etc::preferences "${apt}/preferences";`,
    `Dir::Etc::preferencesparts "${apt}/preferences.d";`,
    `Dir::State::Lists "${apt}/lists";`,
    `Dir::State::extended_states "${apt}/state/extended_states";`,
    `Dir::Cache "${apt}/cache";`,
    `Dir::Cache::archives "${apt}/cache/archives";`,
    'APT::Sandbox::User "root";',
    'Acquire::Languages "none";',
  ]
  await writeFile(join(apt, 'apt.conf'), conf.join('\n') + '\n')
  const env = {APT_CONFIG: join(apt, 'apt.conf')}
  return {env, repo, update: () => dpkg(['update', '-q'], 'apt-get', env)}
}
