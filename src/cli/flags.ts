import {Args, Flags} from '@oclif/core'

import {type SettingKey, SETTINGS, settingString} from '../lib/config/settings.js'
import {DEFAULT_MAX_AGE} from '../lib/run/defaults.js'

/**
 * A flag backed by a node setting: when the flag is not given, the value comes from the
 * settings layer (environment, then /etc/localpuppet/config.yaml, then the built-in
 * default), so flag > env > file > default is decided in one place.
 */
export function settingFlag(key: SettingKey, options: {description: string; helpValue: string; defaultHelp: string}) {
  return Flags.string({
    description: `${options.description} (env ${SETTINGS[key].env}, config ${key})`,
    helpValue: options.helpValue,
    default: async () => (await settingString(key)) as string,
    defaultHelp: async () => options.defaultHelp,
    noCacheDefault: true,
  })
}

/** Flags shared by the commands that read state: where runs are recorded. */
export const stateFlags = {
  'state-dir': settingFlag('state_dir', {
    description: 'where run records and logs live',
    helpValue: 'DIR',
    defaultHelp: '/var/lib/localpuppet for root, else $XDG_STATE_HOME/localpuppet or ~/.local/state/localpuppet',
  }),
}

/** --allow-untrusted: for the commands that check what they trust (see util/trusted-path.ts). */
export const trustFlags = {
  'allow-untrusted': Flags.boolean({
    description: 'use a state dir, module dir or release that is owned by another user or writable by others (a warning; apply records it in the run record)',
  }),
}

/** Where releases live: every command that reads or writes them. */
export const moduleDirFlags = {
  'module-dir': settingFlag('module_dir', {
    description: 'the module directory holding <app>/trunk and <app>/tags/<tag>',
    helpValue: 'DIR',
    defaultHelp: '/etc/puppet/modules',
  }),
}

/** The puppet executable. */
export const puppetFlags = {
  puppet: settingFlag('puppet', {description: 'the puppet executable', helpValue: 'PATH', defaultHelp: 'puppet on PATH, else /opt/puppetlabs/bin/puppet'}),
}

/** Where releases come from: fetch, and apply/plan with --fetch. */
export const sourceFlags = {
  source: Flags.string({description: 'the release repository: https://, http://, file:// or a directory; or apt, for packages made by pack --format deb (env LOCALPUPPET_SOURCE, config source)', helpValue: 'URL|DIR|apt'}),
  trust: Flags.string({
    description: 'require signatures by this public key (PEM file, or a directory of them), besides /etc/localpuppet/trusted-keys; repeatable (env LOCALPUPPET_TRUST, config trust)',
    multiple: true,
    helpValue: 'PUB.pem',
  }),
  insecure: Flags.boolean({description: 'allow a plain http:// source with no trusted key (anyone on the path could substitute releases)'}),
}

/** Flags that decide what a run resolves to and how puppet is started: shared by plan and apply. */
export const runFlags = {
  ...moduleDirFlags,
  manifest: Flags.string({
    description: 'the manifest puppet applies [default: /etc/puppet/manifests/default.pp when it exists, else an empty one]',
    helpValue: 'FILE',
  }),
  ...stateFlags,
  ...trustFlags,
  ...puppetFlags,
  noop: Flags.boolean({description: 'run puppet with --noop: report what would change, change nothing'}),
  'detailed-exitcodes': Flags.boolean({description: "exit with Puppet's own codes: 0 no changes, 2 changes, 4 failures, 6 both, 1 failed run"}),
  layers: settingFlag('layers_dir', {
    description: 'the directory of the layers inputs name (site/dc1 is DIR/site/dc1.yaml)',
    helpValue: 'DIR',
    defaultHelp: 'layers/ beside the input file',
  }),
  fact: Flags.string({
    description: 'set a fact for this run (FACTER_NAME=VALUE), e.g. lifecycle_stage=bootstrap; repeatable',
    multiple: true,
    helpValue: 'NAME=VALUE',
  }),
  timeout: Flags.integer({description: 'stop puppet and everything it started after this many seconds (exit 75)', min: 1, helpValue: 'SECONDS'}),
  'allow-mutable': Flags.boolean({description: 'let a tagged release depend on trunk, branches or ranges (recorded in the run record)'}),
  fetch: Flags.boolean({description: "first fetch the input's release (a range: the newest matching tag in the repository) and its dependencies from the source; when the source cannot be reached (69), run the installed release if it verifies, with a warning (recorded)"}),
  ...sourceFlags,
}

/** apply's and plan's INPUT: the `input` setting when not given. */
export const inputArgs = {
  input: Args.string({
    description: 'the input YAML (ENC document plus app); - reads standard input (env LOCALPUPPET_INPUT, config input)',
    default: async () => (await settingString('input')) as string,
  }),
}

/** Where apply (and rollback) write Prometheus metrics after every attempt; unset: none. */
export const metricsFlags = {
  'metrics-file': Flags.string({
    description:
      "after every attempt, write the node's metrics in Prometheus' text format to FILE, atomically, e.g. /var/lib/prometheus/node-exporter/localpuppet.prom for the node exporter's textfile collector (env LOCALPUPPET_METRICS_FILE, config metrics_file)",
    helpValue: 'FILE',
    default: async () => (await settingString('metrics_file')) ?? undefined,
    noCacheDefault: true,
  }),
}

/** The flags of an attempt: apply's, and rollback's (which is apply --replay of a run it picks). */
export const attemptFlags = {
  ...runFlags,
  ...metricsFlags,
  save: Flags.boolean({description: "make this run's release the node's: rewrite the input's app (atomically, nothing else in the file changes) once the run succeeded; a run that fails leaves it alone"}),
  detach: Flags.boolean({description: 'check what can fail fast, then run in the background: print the run id and exit 0 at once'}),
  'if-changed': Flags.boolean({description: "skip the run (state: skipped) when nothing changed since the newest succeeded run, and that run is younger than --max-age"}),
  'max-age': Flags.string({
    description: `with --if-changed: skip only while the newest succeeded run is younger than this (e.g. 90m, 6h, 1d; default ${DEFAULT_MAX_AGE}); after that a full run corrects any drift`,
    dependsOn: ['if-changed'],
    helpValue: 'DURATION',
  }),
  splay: Flags.integer({description: 'wait a random 0..SECONDS before taking the lock, so a fleet on a timer does not stampede', min: 0, helpValue: 'SECONDS'}),
  'on-finish': Flags.string({description: 'once the run record is final (refused attempts too), run CMD with /bin/sh: the record as JSON on stdin (a file: /dev/stdin works), LOCALPUPPET_RUN_ID and LOCALPUPPET_RUN_STATE set', helpValue: 'CMD'}),
  keep: Flags.integer({description: 'run directories to keep (the newest; a running one is never removed)', min: 1, default: 100, helpValue: 'N'}),
  'detached-child': Flags.boolean({hidden: true, description: 'internal: the background half of --detach'}),
}
