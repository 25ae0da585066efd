/** Where things live on a node unless flags say otherwise. Kept import-free for start-up time. */
export const DEFAULT_INPUT = '/etc/puppet/input.yaml'
export const DEFAULT_MODULE_DIR = '/etc/puppet/modules'
export const DEFAULT_MANIFEST = '/etc/puppet/manifests/default.pp'
