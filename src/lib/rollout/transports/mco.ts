import {mkdtemp, rm, writeFile} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {stripVTControlCharacters} from 'node:util'

import {FleetUnavailableError} from '../../errors.js'
import {capture} from '../../util/capture.js'
import type {NodeReport, RunReport, StartAnswer} from '../engine.js'
import type {RolloutSettings} from '../settings.js'
import {type FleetTransport, NODE_NAME} from './transport.js'
import {type NodeReply, nodeFromReply, num, runFromReply, str} from './node-reply.js'

/*
 * The rollout's MCollective transport: one `mco rpc localpuppet ACTION ... --json` process
 * per call, over the localpuppet agent in integrations/mcollective/. The operator's
 * discovery flags find the fleet once; every later call addresses exactly the nodes it
 * concerns (a nodes file: mco's flatfile discovery, no broadcast, no discovery wait).
 */

/** How mco is reached: its executable, connection options (--config, -T) and discovery options (-W, -I, --nodes...). */
export interface McoOptions {
  mco: string
  connection: string[]
  discovery: string[]
  /** Seconds a node has to answer a start (mco -t), or null: 30 s, 120 s with --fetch. */
  replyTimeout: number | null
  /** Seconds a node has to answer a status request, discovery's included (mco -t), or null: 20 s (fleet status -t). */
  statusTimeout?: number | null
  /** Seconds discovery waits for answers (mco --dt), or null for mco's own. */
  discoveryTimeout: number | null
}

/** `--via mco`, as a rollout record keeps it. */
export type McoSpec = {via: 'mco'} & McoOptions

/** The options of a recorded spec (a spec's statusTimeout is not kept: the caller sets its own). */
export function mcoOptions(spec: McoSpec): McoOptions {
  return {mco: spec.mco, connection: spec.connection, discovery: spec.discovery, replyTimeout: spec.replyTimeout, discoveryTimeout: spec.discoveryTimeout}
}

const MAX_OUTPUT = 256 * 1024 * 1024
/** How long a node the survey found silent has to answer when its turn comes. */
const PROBE_SECONDS = 3
/** The agent's `status wait=` range. */
const MAX_WAIT_SECONDS = 50
export class McoTransport implements FleetTransport {
  private dir: string | null = null
  readonly fleetKey: string
  readonly nodesFile: string | null
  readonly named: {nodes: string[]; only: boolean}

  constructor(readonly options: McoOptions) {
    this.fleetKey = JSON.stringify({connection: options.connection, discovery: options.discovery})
    const nodesAt = options.discovery.indexOf('--nodes')
    this.nodesFile = nodesAt === -1 ? null : options.discovery[nodesAt + 1]
    const named = literalIdentities(options.discovery)
    this.named = {nodes: named, only: named.length > 0 && options.discovery.every((value, i) => (i % 2 === 0 ? value === '-I' : named.includes(value)))}
  }

  /** Removes the nodes files it wrote. */
  async close(): Promise<void> {
    if (this.dir) await rm(this.dir, {recursive: true, force: true})
    this.dir = null
  }

  /**
   * `mco rpc localpuppet ACTION ARGS`: each node's first reply, only from the nodes asked (a
   * reply from any other is not believed). `nodes` null: the operator's discovery decides.
   */
  async call(action: string, args: string[], nodes: string[] | null, timeoutSeconds: number, signal?: AbortSignal): Promise<Map<string, NodeReply>> {
    const addressing = nodes === null ? [...this.options.discovery, ...(this.options.discoveryTimeout === null ? [] : ['--dt', String(this.options.discoveryTimeout)])] : ['--nodes', await this.writeNodesFile(nodes)]
    // mco takes `-t 5` for its own default and waits the DDL's 120 s instead (rpc/client.rb): never pass 5.
    const seconds = Math.max(1, Math.ceil(timeoutSeconds))
    const argv = ['rpc', ...this.options.connection, ...addressing, '-t', String(seconds === 5 ? 6 : seconds), '--json', 'localpuppet', action, ...args]
    // Discovery and mco's own start-up come on top of the reply timeout.
    const result = await capture(this.options.mco, argv, {timeoutMs: (timeoutSeconds + 60) * 1000, signal, maxBytes: MAX_OUTPUT, env: {LANG: 'C.UTF-8'}})
    if (signal?.aborted) throw new FleetUnavailableError('interrupted')
    if (result.spawnError) throw new FleetUnavailableError(`cannot run ${this.options.mco}: ${result.spawnError.message}`, ['install mcollective-client, or give --mco PATH'])
    // mco colours its own messages: the colours go before the text is stored or put in JSON.
    const said = stripVTControlCharacters(result.stderr).trim().split('\n').filter(Boolean).at(-1) ?? ''
    let parsed: unknown
    try {
      parsed = JSON.parse(result.stdout)
    } catch {
      if (/did not discover any nodes|No request sent/i.test(`${result.stdout}\n${result.stderr}`)) return new Map()
      const why = result.timedOut ? `did not finish within ${timeoutSeconds + 60}s` : `exited ${result.exitCode ?? 'on a signal'}${said ? `: ${said}` : ''}`
      throw new FleetUnavailableError(`mco rpc localpuppet ${action} ${why}`, ['check the broker and the client configuration (mco ping)'])
    }

    if (!Array.isArray(parsed)) throw new FleetUnavailableError(`mco rpc localpuppet ${action}: its JSON is not a list of replies`)
    const asked = nodes === null ? null : new Set(nodes)
    const replies = new Map<string, NodeReply>()
    for (const entry of parsed as unknown[]) {
      if (entry === null || typeof entry !== 'object') continue
      const {sender, statuscode, statusmsg, data} = entry as Record<string, unknown>
      if (typeof sender !== 'string' || (asked && !asked.has(sender)) || replies.has(sender)) continue
      replies.set(sender, {
        sender,
        statuscode: typeof statuscode === 'number' ? statuscode : 5,
        statusmsg: typeof statusmsg === 'string' ? stripVTControlCharacters(statusmsg) : '',
        data: data !== null && typeof data === 'object' && !Array.isArray(data) ? (data as Record<string, unknown>) : {},
      })
    }

    return replies
  }

  /** The nodes the operator's discovery finds, with how each is (one status request does both). */
  async discover(signal?: AbortSignal): Promise<Record<string, NodeReport>> {
    const replies = await this.call('status', [], null, this.options.statusTimeout ?? 20, signal)
    return Object.fromEntries([...replies].map(([node, reply]) => [node, nodeFromReply(reply)]))
  }

  async survey(nodes: string[], signal?: AbortSignal): Promise<Record<string, NodeReport>> {
    const replies = await this.call('status', [], nodes, this.options.statusTimeout ?? 20, signal)
    return Object.fromEntries([...replies].map(([node, reply]) => [node, nodeFromReply(reply)]))
  }

  /** A node the survey found silent, asked again at its turn: a few seconds, not a whole -t, so that it never holds its batch. */
  async probe(nodes: string[], signal?: AbortSignal): Promise<Record<string, NodeReport>> {
    const replies = await this.call('status', [], nodes, Math.min(PROBE_SECONDS, this.options.statusTimeout ?? PROBE_SECONDS), signal)
    return Object.fromEntries([...replies].map(([node, reply]) => [node, nodeFromReply(reply)]))
  }

  async start(nodes: string[], settings: RolloutSettings, signal?: AbortSignal): Promise<Record<string, StartAnswer>> {
    const args = [...(settings.ref === null ? [] : [`app=${settings.ref}`]), ...runArgs(settings)]
    if (settings.fetch) args.push('fetch=true')
    if (settings.save) args.push('save=true')
    return this.starts(await this.call('apply', args, nodes, this.startTimeout(settings), signal))
  }

  async revert(entries: Array<{node: string; release: string; save: boolean}>, settings: RolloutSettings, signal?: AbortSignal): Promise<Record<string, StartAnswer>> {
    // One call per release and save: each node goes back to its own release.
    const groups = new Map<string, string[]>()
    for (const entry of entries) {
      const key = `${entry.release}\n${entry.save}`
      groups.set(key, [...(groups.get(key) ?? []), entry.node])
    }

    const answers: Record<string, StartAnswer> = {}
    for (const [key, nodes] of groups) {
      const [release, save] = key.split('\n')
      const args = [`to=${release}`, ...(save === 'true' ? ['save=true'] : []), ...runArgs({...settings, noop: false})]
      Object.assign(answers, this.starts(await this.call('rollback', args, nodes, this.startTimeout(settings), signal)))
    }

    return answers
  }

  async poll(runs: Array<{node: string; runId: string}>, waitMs: number, signal?: AbortSignal): Promise<Record<string, RunReport>> {
    const wait = Math.max(1, Math.min(MAX_WAIT_SECONDS, Math.round(waitMs / 1000)))
    const pairs = runs.map((run) => `${run.node}=${run.runId}`).join(',')
    const replies = await this.call('status', [`runs=${pairs}`, `wait=${wait}`], runs.map((run) => run.node), wait + 10, signal)
    const answers: Record<string, RunReport> = {}
    for (const [node, reply] of replies) {
      const run = runFromReply(reply)
      if (run) answers[node] = run
    }

    return answers
  }

  private startTimeout(settings: RolloutSettings): number {
    return this.options.replyTimeout ?? (settings.fetch ? 120 : 30)
  }

  private starts(replies: Map<string, NodeReply>): Record<string, StartAnswer> {
    const answers: Record<string, StartAnswer> = {}
    for (const [node, reply] of replies) {
      const runId = str(reply.data.run_id)
      if (reply.statuscode === 0 && runId !== null) {
        answers[node] = {run: {runId, state: str(reply.data.state) ?? 'running', release: str(reply.data.release), startedAt: str(reply.data.started_at)}}
      } else {
        const exitCode = num(reply.data.exit_code) ?? 1
        answers[node] = {exitCode, busy: reply.data.error_code === 'locked', message: (str(reply.data.message) ?? str(reply.statusmsg) ?? 'refused').split('\n')[0]}
      }
    }

    return answers
  }

  private async writeNodesFile(nodes: string[]): Promise<string> {
    this.dir ??= await mkdtemp(join(tmpdir(), 'localpuppet-rollout-'))
    const file = join(this.dir, 'nodes.txt')
    await writeFile(file, nodes.join('\n') + '\n', {mode: 0o600})
    return file
  }
}

/** The run options apply and rollback share, as agent inputs. */
function runArgs(settings: RolloutSettings): string[] {
  const args: string[] = []
  if (settings.noop) args.push('noop=true')
  if (settings.timeoutSeconds !== null) args.push(`timeout=${settings.timeoutSeconds}`)
  return args
}

/** The identities given with -I that name one node (mco takes `/.../` as a regular expression). */
function literalIdentities(discovery: string[]): string[] {
  const named: string[] = []
  for (let i = 0; i < discovery.length - 1; i++) {
    if (discovery[i] === '-I' && NODE_NAME.test(discovery[i + 1]) && !named.includes(discovery[i + 1])) named.push(discovery[i + 1])
  }

  return named
}
