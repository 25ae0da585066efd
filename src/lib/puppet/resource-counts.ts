/**
 * What Puppet's run summary counts of a run's resources, as the run record keeps them.
 * Apart from both, so that the summary's reader and the run record share the shape
 * without importing each other.
 */
export interface ResourceCounts {
  changed: number
  failed: number
  /** Resources that differed from the catalog: what a --noop run would have changed. */
  outOfSync: number
  total: number
  /** Changes that put back what had drifted from the catalog (Puppet's corrective_change); absent in older records. */
  correctiveChange?: number
}
