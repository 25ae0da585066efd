import {createHash} from 'node:crypto'
import {readFile} from 'node:fs/promises'
import {join} from 'node:path'

import {ImmutabilityError, NotFoundError, ReleaseError} from '../errors.js'
import {parseNodeInput} from '../input/node-input.js'
import {readNodeState} from '../state/node-state.js'
import {type RunRecord, newestRecord, readRunRecord} from '../state/run-record.js'
import {manifestCopyPath, runFiles} from '../state/state-dir.js'
import {assertTrustedPaths} from '../util/trusted-path.js'
import {type PlanOptions, type RunPlan, buildRunPlan} from './run-plan.js'

/**
 * apply --replay RUN_ID: a plan that applies exactly what that run applied: its release
 * (as the exact release it resolved to), its ENC document, its --facts, its manifest (the
 * copy kept in its run directory) and its puppet arguments. Refused (65) when the release
 * now resolves to another modulepath, when a tag on it no longer verifies (naming the
 * file), or when anything on it is mutable (trunk, a branch, a range) unless allowMutable.
 * The options' noop, puppet, timeout, colour and state dir are this run's own.
 */
export async function buildReplayPlan(replayId: string, options: PlanOptions, runId: string): Promise<RunPlan> {
  // What is replayed (the ENC document, the facts, the puppet arguments, the manifest copy)
  // is root's to run: a run directory or record another user owns or others can write is
  // theirs to forge (77, before it is read; --allow-untrusted replays it anyway, recorded).
  // The state directory and its runs/ are judged with the rest of the plan.
  const {dir, record: recordPath} = runFiles(options.stateDir, replayId)
  const untrusted = assertTrustedPaths(
    [
      {path: dir, what: `run ${replayId}'s directory`, ancestors: false, content: true},
      {path: recordPath, what: `run ${replayId}'s record`, ancestors: false, content: true},
    ],
    Boolean(options.allowUntrusted),
  )
  const record = await readRunRecord(options.stateDir, replayId)
  if (record.release === null || record.command.length === 0) {
    throw new ReleaseError(`run ${replayId} was ${record.state} before it resolved a release: nothing to replay`)
  }

  if (record.puppetArgs === undefined) {
    throw new ReleaseError(`run ${replayId} was recorded by an older localpuppet (no puppet arguments, no manifest copy): it cannot be replayed exactly`)
  }

  const old = runFiles(options.stateDir, replayId)
  const oldManifest = manifestCopyPath(options.stateDir, replayId)
  let manifest: string | undefined
  if (record.manifestDigest) {
    const bytes = await readFile(oldManifest).catch(() => {
      throw new NotFoundError(`run ${replayId}: its copy of the manifest ${oldManifest} is gone; it cannot be replayed exactly`)
    })
    if (`sha256:${createHash('sha256').update(bytes).digest('hex')}` !== record.manifestDigest) {
      throw new ReleaseError(`run ${replayId}: ${oldManifest} no longer matches the manifest that run applied`)
    }

    manifest = oldManifest
  }

  // A layered run: the document it computed, as it was (today's layers may say otherwise), never merged again.
  const document = record.layers ? record.layers.document : record.input.document
  const parsed = parseNodeInput(JSON.stringify({...document, app: record.release}), `${record.input.source} (run ${replayId})`)
  // Its secrets are recorded redacted: that run's directory keeps them encrypted to this node, opened again here.
  const {replaySecrets} = await import('../secrets/replay-secrets.js')
  const input = await replaySecrets(parsed, old.dir, options.stateDir, `run ${replayId}`)
  const plan = await buildRunPlan(
    input,
    {
      ...options,
      manifest,
      // No manifest recorded: the empty one, never today's default.
      defaultManifest: join(old.dir, 'no-manifest'),
      facts: record.facts,
      puppetArgs: record.puppetArgs,
      untrusted: [...(options.untrusted ?? []), ...untrusted],
      layersDir: undefined,
      ...(record.layers ? {layered: record.layers} : {}),
      // As that run compiled it; a run recorded before modes were pinned gets the release's (explicit) mode.
      ...(record.languageMode ? {languageMode: record.languageMode} : {}),
    },
    runId,
  )
  if (JSON.stringify(plan.modulepath) !== JSON.stringify(record.modulepath)) {
    throw new ReleaseError(`replay of run ${replayId}: ${record.release} now resolves to modulepath ${plan.modulepath.join(':')}, not ${record.modulepath.join(':')} as that run had`)
  }

  const mutable = plan.releases.filter((release) => release.mutable)
  if (mutable.length > 0 && !options.allowMutable) {
    throw new ImmutabilityError(
      `replay of run ${replayId}: ${mutable.map((release) => release.ref).join(', ')} ${mutable.length === 1 ? 'is' : 'are'} mutable: what it holds now may not be what that run applied`,
      ['--allow-mutable replays it anyway (recorded in the run record)'],
    )
  }

  plan.replayOf = replayId
  plan.mutableEntries = [...new Set([...plan.mutableEntries, ...mutable.map((release) => release.ref)])]
  return plan
}

/**
 * `localpuppet rollback`: the run to replay. The current release is that of the newest
 * completed run; the target is the newest succeeded (not noop) run of any other release,
 * or, with `to`, of exactly that release (a fleet's revert names each node's own release
 * before, so that no node goes further back than it was). 66 when there is none.
 */
export async function findRollbackTarget(stateDir: string, to?: string): Promise<{from: string | null; target: RunRecord}> {
  const state = await readNodeState(stateDir)
  const from = state.lastCompleted?.release ?? null
  const target = newestRecord(
    state.records,
    (record) => record.state === 'succeeded' && !record.noop && record.release !== null && (to === undefined ? record.release !== from : record.release === to),
  )
  if (!target) {
    const what = to === undefined ? `a release other than ${from ?? 'the current one'}` : to
    throw new NotFoundError(`no succeeded run of ${what} in ${stateDir}: nothing to roll back to`, [
      'localpuppet history lists the runs; apply --app REF applies a release by name',
    ])
  }

  return {from, target}
}
