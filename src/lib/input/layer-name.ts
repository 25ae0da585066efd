/** A layer's name: path-like, lowercase words (`site/dc1`, `role/web-front`). */
const LAYER_NAME = /^[a-z0-9][a-z0-9_.-]*(?:\/[a-z0-9][a-z0-9_.-]*)*$/

/**
 * True for `site/dc1`, `role/web`; false for `../x`, `/abs`, `a//b`, `Site`, `x.yaml`: a
 * name is a path under the layers directory (NAME.yaml) and never leaves it.
 */
export function isValidLayerName(name: unknown): name is string {
  return typeof name === 'string' && name.length <= 255 && LAYER_NAME.test(name) && !name.split('/').some((segment) => segment === '.' || segment === '..' || segment.endsWith('.yaml'))
}
