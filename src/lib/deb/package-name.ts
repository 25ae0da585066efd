import {ReleaseError} from '../errors.js'

/** Every package localpuppet makes is named `localpuppet-<app>-<tag>`. */
export const PACKAGE_PREFIX = 'localpuppet-'

/** Debian's rule for package names (Policy 5.6.1). */
const DEBIAN_NAME = /^[a-z0-9][a-z0-9+.-]+$/
/** A Debian version without epoch: upstream starts with a digit; a revision follows the last hyphen. */
const DEBIAN_UPSTREAM = /^[0-9][A-Za-z0-9.+~-]*$/
const DEBIAN_REVISION = /^[A-Za-z0-9.+~]+$/
/** Where the app ends and the tag begins: the first `-` before a digit or `v` and a digit. */
const BOUNDARY = /-(?=v?[0-9])/

/**
 * The package of a tag: `localpuppet-<app>-<tag>`, so that every tag of an app is its own
 * package and several can be installed side by side. The mapping is one-to-one and can be
 * read back from the name alone (apt lists tags from package names):
 *
 * - an app keeps lower-case letters, digits, `.` and `-`; `_` becomes `+` (no app has `+`);
 *   it may not hold `-` followed by a digit or by `v` and a digit (that marks the tag);
 * - a tag keeps lower-case letters, digits, `.`, `+` and `-`, and starts with a digit or
 *   with `v` and a digit;
 * - anything else (upper case, `_` in a tag, ...) is refused: it could only be mapped by
 *   folding two tags into one name.
 */
export function packageName(app: string, tag: string): string {
  const release = `${app}/tags/${tag}`
  const refuse = (why: string): never => {
    throw new ReleaseError(`${release}: cannot be named as a Debian package without ambiguity: ${why}`, [
      'Debian package names are lower case; releases packaged as .deb need apps of [a-z0-9._-] and tags such as 1.4.0 or v1.4.0',
    ])
  }

  const problem = appProblem(app)
  if (problem) refuse(problem)
  if (/[A-Z]/.test(tag)) refuse(`tag ${JSON.stringify(tag)} has upper-case letters`)
  if (!/^v?[0-9][a-z0-9.+-]*$/.test(tag)) refuse(`tag ${JSON.stringify(tag)} must start with a digit (or v and a digit) and hold only [a-z0-9.+-]`)
  const name = `${appPrefix(app)}${tag}`
  if (!DEBIAN_NAME.test(name)) refuse(`${name} is not a valid Debian package name`)
  return name
}

/** What every package name of an app starts with: `localpuppet-<app>-`. Refuses an app that has none. */
export function appPrefix(app: string): string {
  const problem = appProblem(app)
  if (problem) throw new ReleaseError(`app ${JSON.stringify(app)}: has no Debian package name: ${problem}`)
  return `${PACKAGE_PREFIX}${app.replaceAll('_', '+')}-`
}

function appProblem(app: string): string | null {
  if (/[A-Z]/.test(app)) return `app ${JSON.stringify(app)} has upper-case letters`
  if (!/^[a-z0-9][a-z0-9._-]*$/.test(app)) return `app ${JSON.stringify(app)} has characters outside [a-z0-9._-]`
  if (BOUNDARY.test(app)) return `app ${JSON.stringify(app)} has "-" before a digit, which would read as the start of its tag`
  return null
}

/** The app and tag a package name stands for, or null when it is not one of localpuppet's. */
export function parsePackageName(name: string): {app: string; tag: string} | null {
  if (!name.startsWith(PACKAGE_PREFIX)) return null
  const rest = name.slice(PACKAGE_PREFIX.length)
  const at = rest.search(BOUNDARY)
  if (at <= 0) return null
  const app = rest.slice(0, at).replaceAll('+', '_')
  const tag = rest.slice(at + 1)
  try {
    return packageName(app, tag) === name ? {app, tag} : null
  } catch {
    return null
  }
}

/**
 * The package's Version: the tag itself when it is a valid Debian version, the tag
 * without its `v` for `v1.4.0`, else `0` (the package name carries the tag either way).
 */
export function packageVersion(tag: string): string {
  for (const candidate of [tag, tag.replace(/^v(?=[0-9])/, '')]) if (isDebianVersion(candidate)) return candidate
  return '0'
}

function isDebianVersion(version: string): boolean {
  if (!DEBIAN_UPSTREAM.test(version)) return false
  const hyphen = version.lastIndexOf('-')
  return hyphen === -1 || DEBIAN_REVISION.test(version.slice(hyphen + 1))
}
