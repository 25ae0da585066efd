import {Flags} from '@oclif/core'

import {DEFAULT_MODULE_DIR} from './lib/defaults.js'

/** Flags shared by the commands that read state: where runs are recorded. */
export const stateFlags = {
  'state-dir': Flags.string({
    description: 'where run records and logs live [default: /var/lib/localpuppet for root, else $XDG_STATE_HOME/localpuppet or ~/.local/state/localpuppet]',
    env: 'LOCALPUPPET_STATE_DIR',
    helpValue: 'DIR',
  }),
}

/** Where releases live: every command that reads or writes them. */
export const moduleDirFlags = {
  'module-dir': Flags.string({
    description: 'the module directory holding <app>/trunk and <app>/tags/<tag>',
    env: 'LOCALPUPPET_MODULE_DIR',
    default: DEFAULT_MODULE_DIR,
    helpValue: 'DIR',
  }),
}

/** Flags that decide what a run resolves to and how puppet is started: shared by plan and apply. */
export const runFlags = {
  ...moduleDirFlags,
  manifest: Flags.string({
    description: 'the manifest puppet applies [default: /etc/puppet/manifests/default.pp when it exists, else an empty one]',
    helpValue: 'FILE',
  }),
  ...stateFlags,
  puppet: Flags.string({description: 'the puppet executable', env: 'LOCALPUPPET_PUPPET', default: 'puppet', helpValue: 'PATH'}),
  noop: Flags.boolean({description: 'run puppet with --noop: report what would change, change nothing'}),
  'detailed-exitcodes': Flags.boolean({description: "exit with Puppet's own codes: 0 no changes, 2 changes, 4 failures, 6 both, 1 failed run"}),
  fact: Flags.string({
    description: 'set a fact for this run (FACTER_NAME=VALUE), e.g. lifecycle_stage=bootstrap; repeatable',
    multiple: true,
    helpValue: 'NAME=VALUE',
  }),
  timeout: Flags.integer({description: 'stop puppet and everything it started after this many seconds (exit 75)', min: 1, helpValue: 'SECONDS'}),
  'allow-mutable': Flags.boolean({description: 'let a tagged release depend on trunk, branches or ranges (recorded in the run record)'}),
}

/** Where apply (and rollback) write Prometheus metrics after every attempt. */
export const metricsFlags = {
  'metrics-file': Flags.string({
    description:
      "after every attempt, write the node's metrics in Prometheus' text format to FILE, atomically (e.g. /var/lib/prometheus/node-exporter/localpuppet.prom for the node exporter's textfile collector)",
    env: 'LOCALPUPPET_METRICS_FILE',
    helpValue: 'FILE',
  }),
}
