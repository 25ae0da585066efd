import {moduleDirTrustPaths} from '../install/install-record.js'
import {type Resolution, modulepathTrustPaths} from '../release/resolve.js'
import type {TrustOptions} from '../util/trusted-path.js'

/**
 * What a run believes of its releases, one list for apply's plan and validate --compile:
 * every directory from the module directory down to each release root (a world-writable
 * <app>/tags lets anyone swap a tag). What is inside each release is resolve's untrustedTrees.
 */
export function runTrustPaths(moduleDir: string, resolution: Pick<Resolution, 'moduleDir' | 'modulepath'>): Array<{path: string} & TrustOptions> {
  return [...moduleDirTrustPaths(moduleDir), ...modulepathTrustPaths(resolution)]
}

/**
 * The main manifest, code root runs as much as the releases are. `content`: apply's plan
 * asks for the manifest to be reviewed after the fix; validate --compile does not.
 */
export function manifestTrustPaths(manifest: string | null, content: boolean): Array<{path: string} & TrustOptions> {
  return manifest === null ? [] : [{path: manifest, what: 'manifest', ...(content ? {content: true} : {})}]
}
