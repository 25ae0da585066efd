/**
 * Puppet's naming rules, as the Puppet 7 language reference states them, so that bad
 * names are refused with a clear line before Puppet fails with a longer one.
 */

/** Words that cannot be a class name or one segment of it. */
const RESERVED_WORDS = new Set([
  'and', 'application', 'attr', 'case', 'class', 'component', 'consumes', 'default', 'define', 'elsif', 'else',
  'environment', 'false', 'function', 'if', 'import', 'in', 'inherits', 'node', 'or', 'private',
  'produces', 'regexp', 'site', 'true', 'type', 'undef', 'unit', 'unless', 'main', 'settings',
])

const CLASS_SEGMENT = /^[a-z][a-z0-9_]*$/

/** True for `foo`, `foo::bar_baz`; false for `Foo`, `foo-bar`, `::foo`, `class`. */
export function isValidClassName(name: string): boolean {
  if (name.length === 0 || name.length > 255) return false
  return name.split('::').every((segment) => CLASS_SEGMENT.test(segment) && !RESERVED_WORDS.has(segment))
}

/** Class parameter names: `port`, `_private`, `max_conns2`. */
export function isValidParameterName(name: string): boolean {
  return /^[a-z_][A-Za-z0-9_]*$/.test(name) && name.length <= 255
}

/** Top-scope variable names Puppet itself owns; assigning them fails the catalog. */
export const RESERVED_VARIABLES = new Set(['trusted', 'facts', 'server_facts'])

/** Puppet::Node::Environment's rule for directory environment names. */
export function isValidEnvironmentName(name: string): boolean {
  return /^[a-z0-9_]+$/.test(name) && name.length <= 255
}
