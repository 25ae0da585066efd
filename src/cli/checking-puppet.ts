/**
 * The puppet executable validate's Puppet checks run (validate, and publish for node
 * inputs): `none` is null (those checks skipped); one not found is 69; run as root, one
 * others could rewrite would run their code as root (77).
 */
export async function checkingPuppet(flag: string): Promise<string | null> {
  if (flag === 'none') return null
  const [{findPuppet}, {PuppetUnavailableError}] = await Promise.all([import('../lib/puppet/puppet-identity.js'), import('../lib/errors.js')])
  const puppet = findPuppet(flag)
  if (puppet === null) throw new PuppetUnavailableError(`puppet not found: ${flag}`, ['install it, or pass --puppet none to skip the checks that need Puppet (syntax; undefined variables)'])
  if ((process.geteuid?.() ?? 0) === 0) (await import('../lib/util/trusted-path.js')).assertTrustedPath(puppet, {what: 'puppet executable', content: true, overridable: false})
  return puppet
}
