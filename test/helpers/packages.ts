import type {Implementation, TestFn} from 'ava'

import {dpkg} from './dpkg.js'

/** Debian packages that are not (fully) installed, of these. */
async function notInstalled(packages: string[]): Promise<string[]> {
  const result = await dpkg(['-W', '-f', '${Package} ${db:Status-Abbrev}\n', ...packages], 'dpkg-query')
  const installed = new Set(
    result.stdout
      .split('\n')
      .map((line) => line.split(' '))
      .filter(([, status]) => status === 'ii')
      .map(([name]) => name),
  )
  return packages.filter((name) => !installed.has(name))
}

/**
 * What `bin/setup --tests` installs, for a test that needs some of it: the packages that
 * are missing are installed when we are root (from Debian's archive, waiting for dpkg's
 * lock); otherwise, or when apt fails, the reason to skip, naming them. Undefined: all there.
 */
export async function needPackages(packages: string[]): Promise<string | undefined> {
  const missing = await notInstalled(packages)
  if (missing.length === 0) return undefined
  if (process.getuid?.() !== 0) return `missing Debian packages ${missing.join(', ')} and not root to install them (run bin/setup --tests as root)`
  const env = {DEBIAN_FRONTEND: 'noninteractive'}
  const update = await dpkg(['update', '-qq'], 'apt-get', env)
  const install = await dpkg(['install', '-y', '-qq', '--no-install-recommends', ...missing], 'apt-get', env)
  const still = await notInstalled(packages)
  return still.length === 0 ? undefined : `missing Debian packages ${still.join(', ')}; apt-get failed: ${(install.stderr || update.stderr).trim().split('\n').pop()}`
}

/**
 * `test`, or, when these packages are missing and cannot be installed, `test.skip` with
 * the reason in the title (and once on stderr), so a skipped test says why.
 */
export async function testNeeding(packages: string[], given?: TestFn | TestFn['serial']): Promise<(title: string, implementation: Implementation<[]>) => void> {
  // ava only where a test file asks: the benchmark imports the fleet helper, which imports this.
  const base = given ?? (await import('ava')).default
  const reason = await needPackages(packages)
  if (reason) console.warn(`skipping the tests that need ${packages.join(', ')}: ${reason}`)
  return (title, implementation) => (reason ? base.skip(`${title} (skipped: ${reason})`, implementation) : base(title, implementation))
}
