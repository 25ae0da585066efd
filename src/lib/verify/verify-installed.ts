import {join} from 'node:path'

import {parseReleaseRef} from '../release/release-ref.js'
import {realModuleDir, resolveRelease} from '../release/resolve.js'
import {assertNoTrustProblems, assertTrustedPaths} from '../util/trusted-path.js'
import {type InstallRecord, assertTrustedModuleDir, listRecordedReleases} from '../install/install-record.js'
import {type VerifyResult, verifyRelease} from './verify.js'

/**
 * Verifies the named tags (any reference form that resolves to a tag), or every recorded
 * one. A module dir whose records others could forge, or a tag others could swap, is
 * refused (77) unless allowed; `untrusted` lists what was allowed.
 */
export async function verifyInstalled(moduleDir: string, refs: string[], options: {allowUntrusted?: boolean} = {}): Promise<{results: VerifyResult[]; untrusted: string[]}> {
  const root = await realModuleDir(moduleDir)
  const seen = new Set<string>()
  // As written: a link on the way is judged too, so the real path cannot change after.
  const untrusted = assertTrustedModuleDir(moduleDir, options.allowUntrusted, seen)
  const releases: string[] = []
  if (refs.length === 0) releases.push(...(await listRecordedReleases(root)))
  for (const ref of refs) {
    const parsed = parseReleaseRef(ref, 'verify')
    const resolved = await resolveRelease(root, parsed, {allowMutable: true, checkTrees: false})
    releases.push(resolved.modulepath[0].release)
  }

  const results: VerifyResult[] = []
  for (const release of releases) results.push(await verifyJudged(root, release, undefined, {allowUntrusted: options.allowUntrusted, seen, untrusted}))
  // A modified file another tag shares is modified there too: its repair removes both.
  const mismatched = results.filter((result) => result.modified.length > 0)
  if (mismatched.length > 0) {
    const [{sharedWithTags}, installed] = await Promise.all([import('./shared-files.js'), listRecordedReleases(root)])
    for (const result of mismatched) {
      const shared = await sharedWithTags(root, result.release, result.modified, installed)
      if (Object.keys(shared).length > 0) result.sharedWith = shared
    }
  }

  return {results, untrusted}
}

/**
 * Verifies a tag and judges it as apply would: every directory from the module dir down
 * to it (a tag others could swap is not reported verified: it could change the moment
 * after), then what it holds (a file others could rewrite matches now, but cannot be
 * relied on). Refused (77) unless allowUntrusted; what was allowed goes to `untrusted`.
 */
export async function verifyJudged(
  root: string,
  release: string,
  record: InstallRecord | null | undefined,
  trust: {allowUntrusted?: boolean; seen: Set<string>; untrusted: string[]},
  options: {cache?: boolean} = {},
): Promise<VerifyResult> {
  const {allowUntrusted, seen, untrusted} = trust
  untrusted.push(...assertTrustedPaths([{path: join(root, release), what: `release ${release}`, below: root, tree: true}], allowUntrusted, seen))
  const result = await verifyRelease(root, release, record, {cache: options.cache})
  untrusted.push(...assertNoTrustProblems([result.untrusted === null ? null : {path: result.untrusted, message: result.untrusted}], allowUntrusted, seen))
  return result
}
