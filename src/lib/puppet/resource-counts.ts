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
  /**
   * Drift: resources the run changed although nothing it depends on changed since the
   * previous run, which succeeded (localpuppet's count, see drift/; Puppet's own
   * corrective_change is computed only by `puppet agent`). Absent in older records and when
   * Puppet's report could not be read.
   */
  correctiveChange?: number
}
