import {readFileSync} from 'node:fs'

/** What bin/build.js records in dist/build.json (see bin/version.js). */
export interface BuildInfo {
  version: string
  commit: string | null
  dirty: boolean
}

/** The build's record beside the bundle, or null when running from src/ (no build). */
export function readBuildInfo(bundleUrl: string): BuildInfo | null {
  try {
    const info = JSON.parse(readFileSync(new URL('build.json', bundleUrl), 'utf8')) as BuildInfo
    return typeof info.version === 'string' ? info : null
  } catch {
    return null
  }
}

/** `localpuppet --version`: the version and the commit it was built from, then where it runs. */
export function versionLine(info: BuildInfo | null, runtime: {platform: string; arch: string; node: string}): string {
  const commit = info?.commit ? `commit ${info.commit}${info.dirty ? ' with uncommitted changes' : ''}` : 'commit unknown: not a build'
  return `localpuppet ${info?.version ?? 'unknown'} (${commit}) ${runtime.platform}-${runtime.arch} node-${runtime.node}\n`
}
