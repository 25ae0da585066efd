import {appendFile, mkdir, readFile} from 'node:fs/promises'
import {dirname, join} from 'node:path'

import type {NodeState} from '../state/node-state.js'
import {COMPLETED_STATES, type RunRecord, type RunState, newestRecord, signedExpiry} from '../state/run-record.js'
import {writeFileAtomic} from '../util/atomic-write.js'
import {appliedAndDrift} from '../state/applied.js'
import type {NodeIdentity} from '../config/node-identity.js'
import {lastAttemptInfo} from './attempt-info.js'
import {type MetricFamily, renderPrometheus} from './prometheus.js'

const STATES: RunState[] = ['succeeded', 'failed', 'error', 'interrupted', 'skipped', 'refused', 'busy']

/** `<state-dir>/attempts`: one line per finished attempt (its final state), appended; what the counters count. */
export function attemptsFile(stateDir: string): string {
  return join(stateDir, 'attempts')
}

/** Counts a finished attempt. Appends of one short line are atomic, so concurrent attempts (busy ones) lose nothing. */
export async function countAttempt(stateDir: string, state: RunState): Promise<void> {
  await appendFile(attemptsFile(stateDir), `${state}\n`, {mode: 0o600})
}

export async function readAttemptCounts(stateDir: string): Promise<Record<string, number>> {
  const counts: Record<string, number> = Object.fromEntries(STATES.map((state) => [state, 0]))
  const text = await readFile(attemptsFile(stateDir), 'utf8').catch(() => '')
  for (const line of text.split('\n')) if (line in counts) counts[line]++
  return counts
}

const seconds = (iso: string | null | undefined) => (iso ? Date.parse(iso) / 1000 : Number.NaN)
const isSuccess = (record: RunRecord) => record.state === 'succeeded' || record.state === 'skipped'

/**
 * The node's metrics, following Prometheus' naming (base units, `_seconds`,
 * `_timestamp_seconds`, `_total` for counters, `_info` for labels): last attempt and last
 * success, how the newest completed run went, what Puppet last reported, the release, whether
 * Puppet is disabled and attempts by final state.
 */
export function nodeMetrics(state: NodeState, counts: Record<string, number>, disabled: {message: string} | null, node?: NodeIdentity): MetricFamily[] {
  const lastSuccess = newestRecord(state.records, isSuccess)
  const {applied} = appliedAndDrift(state.records)
  const desired = newestRecord(state.records, (record) => record.ref !== null)
  // A refused attempt names its app (the channel) but resolved nothing: what that app last resolved to stands.
  const resolved = desired?.release ?? newestRecord(state.records, (record) => record.ref === desired?.ref && record.release !== null)?.release ?? null
  const since = healthySince(state.records, applied?.release ?? null)
  const completed = state.lastCompleted
  const reported = newestRecord(state.records, (record) => COMPLETED_STATES.includes(record.state) && record.resources !== null)
  const inProgress = state.current?.state === 'running'
  const families: MetricFamily[] = [
    {
      name: 'localpuppet_last_attempt_timestamp_seconds',
      help: 'When the newest attempt to run ended (or started, while it runs), of any outcome: refused and busy ones too.',
      type: 'gauge',
      samples: state.lastAttempt ? [{value: seconds(state.lastAttempt.finishedAt ?? state.lastAttempt.startedAt)}] : [],
    },
    {
      name: 'localpuppet_last_attempt_exit_code',
      help: 'What the newest finished attempt exited with (0 success; see localpuppet apply --help), its state and its release (empty: refused before one was resolved).',
      type: 'gauge',
      samples: (() => {
        const last = newestRecord(state.records, (record) => record.exitCode !== null)
        return last ? [{labels: {state: last.state, release: last.release ?? ''}, value: last.exitCode!}] : []
      })(),
    },
    lastAttemptInfo(state.records),
    {
      name: 'localpuppet_last_success_timestamp_seconds',
      help: 'When the newest run that succeeded, or was skipped because nothing changed since one (--if-changed), ended.',
      type: 'gauge',
      samples: lastSuccess ? [{value: seconds(lastSuccess.finishedAt)}] : [],
    },
    {
      name: 'localpuppet_last_run_success',
      help: 'Whether the newest completed run (puppet ran, or skipped) succeeded: 1, or 0.',
      type: 'gauge',
      samples: completed ? [{value: isSuccess(completed) ? 1 : 0}] : [],
    },
    {
      name: 'localpuppet_last_run_duration_seconds',
      help: 'How long the newest completed run took.',
      type: 'gauge',
      samples: completed?.durationMs != null ? [{value: completed.durationMs / 1000}] : [],
    },
    {
      name: 'localpuppet_last_run_resources',
      help: "Resources in Puppet's summary of the newest run it reported on, by kind: changed, failed, out_of_sync, total.",
      type: 'gauge',
      samples: reported?.resources
        ? [
            {labels: {kind: 'changed'}, value: reported.resources.changed},
            {labels: {kind: 'failed'}, value: reported.resources.failed},
            {labels: {kind: 'out_of_sync'}, value: reported.resources.outOfSync},
            {labels: {kind: 'total'}, value: reported.resources.total},
            ...(reported.noop || reported.resources.correctiveChange === undefined ? [] : [{labels: {kind: 'corrective_change'}, value: reported.resources.correctiveChange}]),
          ]
        : [],
    },
    {
      name: 'localpuppet_release_info',
      help: 'The release the newest completed run applied (release, the reference it came from, the app); always 1.',
      type: 'gauge',
      samples: completed?.release ? [{labels: {release: completed.release, ref: completed.ref ?? completed.release, app: completed.release.split('/')[0]}, value: 1}] : [],
    },
    {
      name: 'localpuppet_desired_release_info',
      help: "What the node should run: its input's app as written (ref), its channel (empty: none), the release it resolved to (by the newest attempt that resolved it; empty: not resolved yet), the node's name and where its input comes from (file or repository); always 1.",
      type: 'gauge',
      samples: desired?.ref
        ? [
            {
              labels: {
                node: node?.node ?? '',
                app: resolved?.split('/')[0] ?? desired.ref.replace(/^app\//, '').split(/[/@]/)[0],
                ref: desired.ref,
                channel: channelOf(desired.ref),
                release: resolved ?? '',
                input: node?.inputFrom ?? 'file',
              },
              value: 1,
            },
          ]
        : [],
    },
    {
      name: 'localpuppet_applied_release_info',
      help: 'The release of the newest run that succeeded without --noop: what the node has applied (a noop or failed run never counts); always 1.',
      type: 'gauge',
      samples: applied?.release ? [{labels: {app: applied.release.split('/')[0], release: applied.release}, value: 1}] : [],
    },
    {
      name: 'localpuppet_healthy_since_timestamp_seconds',
      help: 'Since when every completed run has succeeded on the applied release (the end of the first run of that streak); absent when the newest completed run did not succeed.',
      type: 'gauge',
      samples: since ? [{value: seconds(since)}] : [],
    },
    {
      name: 'localpuppet_puppet_info',
      help: 'The Puppet the newest completed run ran: implementation (puppet or openvox, from the package or gem that owns it; empty when none does), version and path; always 1.',
      type: 'gauge',
      samples: completed?.puppet?.path ? [{labels: {implementation: completed.puppet.implementation ?? '', version: completed.puppet.version ?? '', path: completed.puppet.path}, value: 1}] : [],
    },
    {
      name: 'localpuppet_run_in_progress',
      help: 'Whether a run holds the lock now: 1, or 0.',
      type: 'gauge',
      samples: [{value: inProgress ? 1 : 0}],
    },
    {
      name: 'localpuppet_puppet_disabled',
      help: 'Whether Puppet is disabled (puppet agent --disable, localpuppet disable): 1 with its message, or 0.',
      type: 'gauge',
      samples: [{labels: {message: disabled?.message ?? ''}, value: disabled ? 1 : 0}],
    },
    {
      name: 'localpuppet_fetch_failed',
      help: 'Whether the newest attempt with --fetch could not reach the release source, or refused its expired index, and ran the installed release instead: 1, or 0.',
      type: 'gauge',
      samples: [{value: newestRecord(state.records, (record) => Boolean(record.fetch))?.fetch?.fallback ? 1 : 0}],
    },
    {
      name: 'localpuppet_index_expiry_timestamp_seconds',
      help: "When the newest repository index a --fetch read (or the node's own document, read in its place) expires (or expired: the node takes nothing new from it, and enforces its installed release); absent before one was read. Alerts: LocalpuppetIndexExpiresSoon, LocalpuppetIndexExpired.",
      type: 'gauge',
      samples: (() => {
        const expires = signedExpiry(newestRecord(state.records, (record) => Boolean(signedExpiry(record.fetch)))?.fetch)
        return expires ? [{value: seconds(expires)}] : []
      })(),
    },
    {
      name: 'localpuppet_runs_total',
      help: 'Attempts to run, by final state (busy: another run was in progress).',
      type: 'counter',
      samples: STATES.map((runState) => ({labels: {state: runState}, value: counts[runState] ?? 0})),
    },
  ]
  return families
}

/** The channel a reference names (`foo/channels/stable`: `stable`), or ''. */
function channelOf(ref: string): string {
  return /^(?:app\/)?[^/@]+\/channels\/([^/]+)$/.exec(ref)?.[1] ?? ''
}

/**
 * When the current streak of successful completed runs (not --noop) on the applied release
 * began: the end of its first run. Null when the newest completed run did not succeed.
 */
export function healthySince(records: RunRecord[], applied: string | null): string | null {
  if (applied === null) return null
  let since: string | null = null
  for (let i = records.length - 1; i >= 0; i--) {
    const record = records[i]
    if (record.noop || !COMPLETED_STATES.includes(record.state)) continue
    if (!isSuccess(record) || record.release !== applied) break
    since = record.finishedAt ?? since
  }

  return since
}

/** Writes the metrics file atomically (readable by the node exporter: 0644), creating its directory. */
export async function writeMetricsFile(path: string, families: MetricFamily[]): Promise<void> {
  await mkdir(dirname(path), {recursive: true})
  await writeFileAtomic(path, renderPrometheus(families), 0o644)
}
