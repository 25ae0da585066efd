import {LocalpuppetError} from '../errors.js'
import {afterAttempt} from '../metrics/attempt-metrics.js'
import {applyPlan} from '../run/apply-run.js'
import {type RunPlan, buildRunPlan, parseFacts} from '../run/run-plan.js'
import type {RunRecord} from '../state/run-record.js'
import {parseDuration} from '../util/duration.js'
import {withStopSignals} from '../util/on-stop.js'
import type {AttemptResult} from './attempt.js'
import {receivePayload, replyToParent} from './detach.js'
import {keptLayersDir} from '../layers/fetch-layers.js'
import {layersDirFor} from '../layers/run-layers.js'
import {applyOptions, planOptions} from './options.js'
import {pinInput} from './plan-attempt.js'
import {type AttemptContext, refuseAttempt} from './refusal.js'

/**
 * The background half of --detach (`apply --detached-child`): takes its orders over IPC,
 * plans from the input the caller read (never reading it again), and replies once the run
 * has started, or with the error that refused it (recorded here).
 */
export async function attemptInBackground(io: {warn(line: string): void}): Promise<AttemptResult> {
  const payload = await receivePayload()
  const options = {...payload.options, color: false}
  const facts = parseFacts(options.facts)
  const context: AttemptContext = {stateDir: options.stateDir, runId: payload.runId, startedAt: new Date(), source: payload.source, noop: options.noop, facts, puppetArgs: options.puppetArgs, puppet: options.puppet}
  let replied = false
  let record: RunRecord | null = null
  try {
    const fetched = payload.fetched
    let plan: RunPlan
    if (options.replay) {
      const {buildReplayPlan} = await import('../run/replay.js')
      plan = await buildReplayPlan(options.replay, planOptions(options, facts, fetched?.fetched), payload.runId)
    } else {
      const [{parseNodeInput}, {parseReleaseRef}] = await Promise.all([import('../input/node-input.js'), import('../release/release-ref.js')])
      context.input = parseNodeInput(payload.inputText, payload.source)
      if (options.app !== undefined) context.input = {...context.input, app: parseReleaseRef(options.app, '--app')}
      context.input = await pinInput(context.input, fetched?.release)
      plan = await buildRunPlan(context.input, {...planOptions(options, facts, fetched?.fetched), untrusted: payload.untrustedBefore, layersDir: fetched?.fetched.input ? keptLayersDir(payload.input) : layersDirFor(options, payload.input)}, payload.runId)
    }

    context.plan = plan
    const maxAgeMs = options.maxAge === undefined ? undefined : parseDuration(options.maxAge, '--max-age')
    return await withStopSignals(async (signal) => {
      const outcome = await applyPlan(plan, {
        ...(await applyOptions(payload.input, options, maxAgeMs)),
        signal,
        onStart: (started) => {
          replied = true
          replyToParent({type: 'started', record: started}).catch(() => {})
        },
      })
      record = outcome.record
      return {record: outcome.record, exitCode: outcome.exitCode}
    })
  } catch (error) {
    if (!replied) {
      if (error instanceof LocalpuppetError) record = await refuseAttempt(error, context, options.onFinish)
      const known = error instanceof LocalpuppetError ? error.toJSON() : {code: 'internal', exitCode: 70, message: (error as Error).message}
      await replyToParent({type: 'error', error: known, recorded: record !== null})
    }

    throw error
  } finally {
    const warning = await afterAttempt(options.stateDir, record, {metricsFile: options.metricsFile, puppet: options.puppet, puppetArgs: options.puppetArgs, allowUntrusted: options.allowUntrusted})
    if (warning) io.warn(warning)
    const {sendToPuppetDb} = await import('./attempt.js')
    const sent = await sendToPuppetDb(options, record)
    if (sent) io.warn(sent)
  }
}
