import {isProcessAlive, processStartTime} from '../util/process.js'
import type {RolloutRecord} from './record.js'
import type {NodeReport, RunReport} from './types.js'

/*
 * What a rollout record says when it is read (rollout, rollout show, rollout list): the
 * status judged against the process that drove it, and what each node has applied.
 * Read-only: nothing here writes the record.
 */

/**
 * The record as seen now: a rollout recorded as running whose process is gone (SIGKILL, a
 * crash, a reboot), or whose pid now belongs to another process (its start time differs),
 * is interrupted, and `--resume` continues it. The record itself is not rewritten.
 */
export function recordAsSeen(record: RolloutRecord): RolloutRecord {
  if (record.status !== 'running' || (isProcessAlive(record.pid) && processStartTime(record.pid) === record.pidStart)) return record
  return {...record, status: 'interrupted', interruption: `its process ${record.pid} ended without finishing it: killed, or the machine went down`}
}

/**
 * Each node's applied release as the rollout leaves it, with one meaning everywhere
 * (fleet status's): the release of its newest run that succeeded without --noop. That is
 * what it had before, unless the node said otherwise since (a soak's recheck, an adopted
 * start) or a run of this rollout succeeded without --noop: its apply run (never in a
 * --noop rollout), then its revert. A failed, running, refused or timed-out run leaves it
 * where it was. Read from the record's events, in order, so a record written before this
 * was kept gives the same answer.
 */
export function appliedByNode(record: RolloutRecord): Map<string, string | null> {
  const applied = new Map<string, string | null>()
  const runs = new Map<string, {apply: string | null; revert: string | null}>()
  for (const node of record.state.nodes) {
    applied.set(node.node, node.before)
    runs.set(node.node, {apply: record.settings.noop ? null : node.runId, revert: node.revert?.runId ?? null})
  }

  const said = (node: string, report: NodeReport | undefined) => {
    if (report && applied.has(node) && report.applied !== undefined) applied.set(node, report.applied)
  }

  const ran = (node: string, run: RunReport | null | undefined) => {
    const ours = runs.get(node)
    if (!ours || !run || run.state !== 'succeeded' || run.noop === true || !run.release) return
    if (run.runId === ours.apply || run.runId === ours.revert) applied.set(node, run.release)
  }

  for (const event of record.events) {
    switch (event.kind) {
      case 'surveyed':
      case 'probed':
      case 'rechecked':
      case 'verified':
      case 'adopted': {
        for (const [node, report] of Object.entries(event.answers)) {
          said(node, report)
          if (event.kind === 'adopted') ran(node, report?.newest)
        }

        break
      }

      case 'started': {
        for (const [node, answer] of Object.entries(event.answers)) if (answer && 'run' in answer) ran(node, answer.run)
        break
      }

      case 'polled': {
        for (const [node, run] of Object.entries(event.answers)) ran(node, run)
        break
      }

      default: {
        break
      }
    }
  }

  return applied
}
