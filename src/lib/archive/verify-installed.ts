import {join} from 'node:path'

import {parseReleaseRef} from '../release/release-ref.js'
import {realModuleDir, resolveRelease} from '../release/resolve.js'
import {assertNoTrustProblems, assertTrustedPaths} from '../util/trusted-path.js'
import {assertTrustedModuleDir, listRecordedReleases} from './install-record.js'
import {type VerifyResult, verifyRelease} from './verify.js'

/**
 * Verifies the named tags (any reference form that resolves to a tag), or every recorded
 * one. A module dir whose records others could forge, or a tag others could swap, is
 * refused (77) unless allowed; `untrusted` lists what was allowed.
 */
export async function verifyInstalled(moduleDir: string, refs: string[], options: {allowUntrusted?: boolean} = {}): Promise<{results: VerifyResult[]; untrusted: string[]}> {
  const root = await realModuleDir(moduleDir)
  const seen = new Set<string>()
  const untrusted = assertTrustedModuleDir(root, options.allowUntrusted, seen)
  const releases: string[] = []
  if (refs.length === 0) releases.push(...(await listRecordedReleases(root)))
  for (const ref of refs) {
    const parsed = parseReleaseRef(ref, 'verify')
    const resolved = await resolveRelease(root, parsed, {allowMutable: true, checkTrees: false})
    releases.push(resolved.modulepath[0].release)
  }

  // Every directory from the module dir down to each tag, as apply checks them: a tag
  // others could swap is not reported as verified (it could change the moment after).
  untrusted.push(...assertTrustedPaths(releases.map((release) => ({path: join(root, release), what: `release ${release}`, below: root, tree: true})), options.allowUntrusted, seen))
  const results: VerifyResult[] = []
  for (const release of releases) {
    const result = await verifyRelease(root, release)
    // A file in the tag others could rewrite: it matches now, but could not be relied on.
    untrusted.push(...assertNoTrustProblems([result.untrusted === null ? null : {path: result.untrusted, message: result.untrusted}], options.allowUntrusted, seen))
    results.push(result)
  }

  return {results, untrusted}
}
