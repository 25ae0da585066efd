import {randomBytes} from 'node:crypto'
import {mkdtemp, rm} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {stripVTControlCharacters} from 'node:util'

import {FleetUnavailableError} from '../../errors.js'
import {ExitCode} from '../../exit-codes.js'
import {capture} from '../../util/capture.js'
import {shellQuote} from '../../util/shell-quote.js'
import type {NodeReport, RunReport, StartAnswer} from '../engine.js'
import type {RolloutSettings} from '../settings.js'
import {type NodeReply, nodeFromReply, runFromReply} from './node-reply.js'
import type {SshTarget} from './ssh-targets.js'
import type {FleetTransport} from './transport.js'

/*
 * The rollout's SSH transport: the system's OpenSSH client runs the localpuppet CLI on each
 * node (`apply --detach --json`, `rollback --detach --json`, `status --json`), the same
 * commands the MCollective agent runs, so no agent is installed. One ssh process per node
 * per call, all through one multiplexed connection per node (ControlMaster), closed in
 * close(). ssh is told never to ask anything (BatchMode) and never to accept a host key it
 * does not already know (StrictHostKeyChecking=yes): a changed key is a refusal naming the
 * node. The remote command's answer is read between two markers of this call's own, so a
 * banner or anything else the node's shell prints around it is left out, and it is bounded
 * in size and time like every answer from a node.
 */

/** How ssh reaches the fleet, recorded in the rollout so that --resume reaches the same nodes the same way. */
export interface SshOptions {
  /** The ssh executable. */
  ssh: string
  /** Every node and how it is reached. */
  targets: SshTarget[]
  /** Where the targets came from (--nodes FILE, --targets, --inventory FILE), for the operator. */
  targetsFrom: string
  /** ssh's client configuration (ssh -F), or null: ~/.ssh/config and the system's ssh_config. */
  config: string | null
  /** The known hosts file (UserKnownHostsFile), or null: ssh's own. */
  knownHosts: string | null
  /** Seconds ssh has to connect (ConnectTimeout), or null: 10. */
  connectTimeout: number | null
  /** localpuppet on the nodes (a name on the remote PATH, or a path). */
  localpuppet: string
  /** Seconds a node has to answer a start once connected, or null: 30 s, 120 s with --fetch. */
  replyTimeout: number | null
  /** Seconds a node has to answer a status request, or null: 20. */
  statusTimeout?: number | null
}

/** SSH's spec in a rollout record. */
export type SshSpec = {via: 'ssh'} & SshOptions

/** What one node said to one command: its exit code and JSON, or that ssh refused to talk to it, or nothing. */
export type SshAnswer =
  | {kind: 'answer'; exitCode: number; json: Record<string, unknown> | null; said: string}
  | {kind: 'refused'; message: string}
  // gaveUp: ssh itself ended without an answer (not reached, a bad configuration), rather than time or size running out.
  | {kind: 'silent'; why: string; gaveUp?: boolean}

const DEFAULT_CONNECT_TIMEOUT = 10
/** The most bytes kept of what one node prints on either stream. */
const MAX_OUTPUT = 8 * 1024 * 1024
/** ssh processes at once. */
const PARALLEL = 32
/** localpuppet status --wait's longest wait per poll. */
const MAX_WAIT_SECONDS = 50
/** How long a master has to close in close(). */
const CLOSE_TIMEOUT_MS = 5000
/** How long a node the survey found silent has (once connected) when its turn comes. */
const PROBE_SECONDS = 3
/** The longest path a control socket may have: sun_path (108 bytes on Linux, 104 elsewhere) less its NUL. */
const MAX_SOCKET_PATH = 103

/** Where the control directory goes: the temporary directory, or /tmp when a socket there (DIR/localpuppet-ssh-XXXXXX/%C, 40 hex) would be too long for ssh to use. */
function controlBase(): string {
  const base = tmpdir()
  return Buffer.byteLength(join(base, 'localpuppet-ssh-XXXXXX')) + 1 + 40 <= MAX_SOCKET_PATH ? base : '/tmp'
}

/** What a node has on top of the time its answer is given: the CLI's own start-up, ssh's session. */
const SLACK_SECONDS = 10

const str = (value: unknown): string | null => (typeof value === 'string' && value !== '' ? value : null)
const num = (value: unknown): number | null => (typeof value === 'number' && Number.isFinite(value) ? value : null)
/** localpuppet's --json answer to a command that failed: {error: {code, exitCode, message}} (a run record's own `error` is a string). */
const failure = (json: Record<string, unknown> | null): Record<string, unknown> | null => (json && json.error !== null && typeof json.error === 'object' && !Array.isArray(json.error) ? (json.error as Record<string, unknown>) : null)
const record = (value: unknown): Record<string, unknown> => (value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : {})

/**
 * A path as the value of an ssh -o option: ssh splits the value into words (a path with a
 * space would be two known hosts files, or a ControlPath with "extra arguments") and expands
 * % tokens in it, so it is quoted and its % doubled.
 */
export const sshOptionPath = (path: string): string => `"${path.replaceAll('%', '%%').replaceAll(/["\\]/g, '\\$&')}"`

/** The remote command: localpuppet's answer between this call's markers, then its exit code. */
export function remoteCommand(localpuppet: string, args: string[], nonce: string): string {
  return `printf '\\n%s\\n' lp-begin-${nonce}; ${[localpuppet, ...args].map(shellQuote).join(' ')} </dev/null; printf '\\n%s %s\\n' lp-end-${nonce} "$?"`
}

/** What the remote command printed between its markers, and its exit code; null when the markers are not there (ssh failed, the output was cut). */
export function readMarked(stdout: string, nonce: string): {exitCode: number; body: string} | null {
  const begin = `\nlp-begin-${nonce}\n`
  const from = stdout.indexOf(begin)
  if (from === -1) return null
  const rest = stdout.slice(from + begin.length)
  const end = new RegExp(`\\nlp-end-${nonce} (\\d{1,3})\\n`).exec(rest)
  if (!end) return null
  return {exitCode: Number(end[1]), body: rest.slice(0, end.index)}
}

/** Why ssh refused to talk to a node (its host key, its authentication), or null: it could not reach it. */
export function sshRefusal(target: SshTarget, stderr: string): string | null {
  const where = `${target.host}${target.port === null ? '' : ` port ${target.port}`}`
  if (/REMOTE HOST IDENTIFICATION HAS CHANGED/.test(stderr)) {
    return `the SSH host key of ${where} has changed (REMOTE HOST IDENTIFICATION HAS CHANGED): not talking to it; if the change is expected, remove the old key (ssh-keygen -R) and add the new one after checking it`
  }

  if (/No \S+ host key is known for|Host key verification failed/.test(stderr)) {
    return `the SSH host key of ${where} is not known (StrictHostKeyChecking): add it to the known hosts file after checking it`
  }

  if (/Permission denied \(/.test(stderr)) return `ssh could not log in to ${where}: ${lastLine(stderr)}`
  return null
}

/** The line of ssh's configuration at fault ("FILE: line N: Bad configuration option: ..."), or null. */
const configLine = (text: string): string | null => /^[^\n]*: line \d+: [^\n]*$/m.exec(stripVTControlCharacters(text))?.[0].trim() ?? null
const lastLine = (text: string): string => stripVTControlCharacters(text).trim().split('\n').filter(Boolean).at(-1)?.trim() ?? ''

/** A status record (`localpuppet status --json`) in the shape of the agent's status reply, so both transports read it alike. */
export function statusReply(node: string, json: Record<string, unknown>, exitCode: number): NodeReply {
  const resources = record(json.resources)
  const data: Record<string, unknown> = {
    run_id: json.id,
    state: json.state,
    release: json.release,
    ref: json.ref,
    noop: json.noop,
    started_at: json.startedAt,
    duration_ms: json.durationMs,
    exit_code: json.exitCode,
    changed: resources.changed,
    failed: resources.failed,
    out_of_sync: resources.outOfSync,
    error: json.error,
    first_error: json.firstError,
    reason: json.reason,
    pointer: json.pointer,
    applied: record(json.applied).release,
    drift: record(json.drift).count,
    puppet_disabled: json.puppetDisabled === undefined || json.puppetDisabled === null ? undefined : String(record(json.puppetDisabled).message ?? ''),
  }
  return {sender: node, statuscode: exitCode === 1 ? 1 : 0, statusmsg: '', data}
}

/** Runs `fn` over `items`, at most `limit` at a time. */
async function eachLimited<T>(items: T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0
  const worker = async () => {
    while (next < items.length) await fn(items[next++])
  }

  await Promise.all(Array.from({length: Math.min(limit, items.length)}, worker))
}

export class SshTransport implements FleetTransport {
  /** The fleet is exactly the targets: nothing is discovered, nothing remembered. */
  readonly nodesFile = null
  readonly listed: {nodes: string[]; from: string}
  readonly fleetKey: string

  private dir: Promise<string> | null = null
  private readonly byNode: Map<string, SshTarget>
  private readonly used = new Set<SshTarget>()
  private readonly warned = new Set<string>()

  constructor(
    readonly options: SshOptions,
    /** Told once per node why ssh refused it when a survey or poll leaves it out (a start says so in its answer). */
    private readonly warn: (line: string) => void = () => {},
  ) {
    this.byNode = new Map(options.targets.map((target) => [target.node, target]))
    this.listed = {nodes: options.targets.map((target) => target.node), from: options.targetsFrom}
    this.fleetKey = JSON.stringify({via: 'ssh', targets: options.targets})
  }

  /** Closes the connections it opened and removes their control sockets. */
  async close(): Promise<void> {
    if (this.dir) {
      const dir = await this.dir
      // As many ssh at once as any call: not one process per node of a large fleet together.
      await eachLimited([...this.used], PARALLEL, async (target) => {
        await capture(this.options.ssh, [...this.sshArgs(target, dir), '-O', 'exit', '--', target.host], {timeoutMs: CLOSE_TIMEOUT_MS, maxBytes: 64 * 1024})
      })
      await rm(dir, {recursive: true, force: true})
    }

    this.dir = null
    this.used.clear()
  }

  /** The options every ssh of this transport takes, then the node's own user and port. */
  private sshArgs(target: SshTarget, dir: string): string[] {
    const {config, knownHosts, connectTimeout} = this.options
    return [
      ...(config === null ? [] : ['-F', config]),
      '-T',
      '-n',
      ...['-o', 'BatchMode=yes', '-o', 'StrictHostKeyChecking=yes'],
      ...(knownHosts === null ? [] : ['-o', `UserKnownHostsFile=${sshOptionPath(knownHosts)}`]),
      ...['-o', 'ControlMaster=auto', '-o', `ControlPath=${sshOptionPath(dir).slice(0, -1)}/%C"`, '-o', 'ControlPersist=60'],
      ...['-o', `ConnectTimeout=${connectTimeout ?? DEFAULT_CONNECT_TIMEOUT}`, '-o', 'ServerAliveInterval=15', '-o', 'ServerAliveCountMax=3'],
      ...(target.user === null ? [] : ['-l', target.user]),
      ...(target.port === null ? [] : ['-p', String(target.port)]),
    ]
  }

  /** `localpuppet ARGS` on one node, with `seconds` for its whole answer once connected. */
  async run(node: string, args: string[], seconds: number, signal?: AbortSignal): Promise<SshAnswer> {
    const target = this.byNode.get(node)
    if (!target) return {kind: 'silent', why: 'not among the targets'}
    // One directory for every connection, made once however many calls start together.
    this.dir ??= mkdtemp(join(controlBase(), 'localpuppet-ssh-'))
    const dir = await this.dir
    this.used.add(target)
    const nonce = randomBytes(12).toString('hex')
    const limit = (this.options.connectTimeout ?? DEFAULT_CONNECT_TIMEOUT) + seconds
    const result = await capture(this.options.ssh, [...this.sshArgs(target, dir), '--', target.host, remoteCommand(this.options.localpuppet, args, nonce)], {
      timeoutMs: limit * 1000,
      signal,
      maxBytes: MAX_OUTPUT,
      env: {LANG: 'C.UTF-8'},
    })
    if (signal?.aborted) throw new FleetUnavailableError('interrupted')
    if (result.spawnError) throw new FleetUnavailableError(`cannot run ${this.options.ssh}: ${result.spawnError.message}`, ['install openssh-client, or give --ssh PATH'])
    const marked = result.truncated ? null : readMarked(result.stdout, nonce)
    if (marked === null) {
      if (result.timedOut) return {kind: 'silent', why: `did not answer within ${limit}s`}
      const refusal = result.exitCode === 255 ? sshRefusal(target, result.stderr) : null
      if (refusal !== null) return {kind: 'refused', message: refusal}
      if (result.truncated) return {kind: 'silent', why: `printed more than ${MAX_OUTPUT} bytes`}
      return {kind: 'silent', why: configLine(result.stderr) ?? (lastLine(result.stderr) || `ssh exited ${result.exitCode ?? 'on a signal'}`), gaveUp: true}
    }

    let json: Record<string, unknown> | null = null
    try {
      const parsed: unknown = JSON.parse(marked.body)
      if (parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)) json = parsed as Record<string, unknown>
    } catch {}

    return {kind: 'answer', exitCode: marked.exitCode, json, said: lastLine(result.stderr)}
  }

  /** `localpuppet ARGS` on each node (ARGS per node), in parallel: each node's answer. */
  async runEach(nodes: string[], argsOf: (node: string) => string[], seconds: number, signal?: AbortSignal): Promise<Map<string, SshAnswer>> {
    const answers = new Map<string, SshAnswer>()
    await eachLimited(nodes, PARALLEL, async (node) => {
      if (signal?.aborted) return
      answers.set(node, await this.run(node, argsOf(node), seconds, signal))
    })
    if (signal?.aborted) throw new FleetUnavailableError('interrupted')
    return answers
  }

  /** Every target with how it is (one status request each). */
  async discover(signal?: AbortSignal): Promise<Record<string, NodeReport>> {
    return this.survey(this.options.targets.map((target) => target.node), signal)
  }

  async survey(nodes: string[], signal?: AbortSignal): Promise<Record<string, NodeReport>> {
    return this.status(nodes, (this.options.statusTimeout ?? 20) + SLACK_SECONDS, signal)
  }

  /**
   * A node the survey found silent, asked again at its turn: a few seconds once connected, so
   * that it never holds its batch. One ssh refuses to talk to (its host key, its login) is
   * not silent: it is given its turn with nothing known of it, and its start is the refusal
   * that names why (77), where silence would make it "no answer".
   */
  async probe(nodes: string[], signal?: AbortSignal): Promise<Record<string, NodeReport>> {
    return this.status(nodes, Math.min(PROBE_SECONDS, this.options.statusTimeout ?? PROBE_SECONDS), signal, true)
  }

  private async status(nodes: string[], seconds: number, signal?: AbortSignal, refusedTakeTurn = false): Promise<Record<string, NodeReport>> {
    const answers = await this.runEach(nodes, () => ['status', '--json'], seconds, signal)
    const reports: Record<string, NodeReport> = {}
    for (const [node, answer] of answers) {
      if (answer.kind === 'answer') {
        // A node with no run yet answers with an error (66): it answered, and has nothing.
        const status = answer.json && !failure(answer.json) ? answer.json : {}
        reports[node] = nodeFromReply(statusReply(node, status, answer.exitCode))
      } else {
        this.refused(node, answer)
        if (answer.kind === 'refused' && refusedTakeTurn) reports[node] = {pointer: null, applied: null, newest: null, disabled: null, drift: null}
      }
    }

    return reports
  }

  async start(nodes: string[], settings: RolloutSettings, signal?: AbortSignal): Promise<Record<string, StartAnswer>> {
    const args = ['apply', '--detach', '--json', ...runFlags(settings), ...(settings.ref === null ? [] : ['--app', settings.ref]), ...(settings.fetch ? ['--fetch'] : [])]
    return this.starts(await this.runEach(nodes, () => args, this.startTimeout(settings) + SLACK_SECONDS, signal))
  }

  async revert(entries: Array<{node: string; release: string; save: boolean}>, settings: RolloutSettings, signal?: AbortSignal): Promise<Record<string, StartAnswer>> {
    // Each node goes back to its own release.
    const byNode = new Map(entries.map((entry) => [entry.node, entry]))
    const argsOf = (node: string) => ['rollback', '--detach', '--json', ...runFlags({...settings, noop: false, save: byNode.get(node)!.save}), '--to', byNode.get(node)!.release]
    return this.starts(await this.runEach([...byNode.keys()], argsOf, this.startTimeout(settings) + SLACK_SECONDS, signal))
  }

  async poll(runs: Array<{node: string; runId: string}>, waitMs: number, signal?: AbortSignal): Promise<Record<string, RunReport>> {
    const wait = Math.max(1, Math.min(MAX_WAIT_SECONDS, Math.round(waitMs / 1000)))
    const ids = new Map(runs.map((run) => [run.node, run.runId]))
    const answers = await this.runEach([...ids.keys()], (node) => ['status', ids.get(node)!, '--json', '--wait', '--timeout', String(wait)], wait + SLACK_SECONDS, signal)
    const reports: Record<string, RunReport> = {}
    for (const [node, answer] of answers) {
      if (answer.kind !== 'answer') {
        this.refused(node, answer)
        continue
      }

      // 0 done, 1 done and failed, 75 still running: each a run record.
      if (!answer.json || failure(answer.json) || ![0, 1, 75].includes(answer.exitCode)) continue
      const run = runFromReply(statusReply(node, answer.json, answer.exitCode))
      // Only the run asked about is believed.
      if (run && run.runId === ids.get(node)) reports[node] = run
    }

    return reports
  }

  /** Says once per node why ssh refused it, or gave up on it (a bad --ssh-config would otherwise leave every node silent with no word of why). */
  private refused(node: string, answer: SshAnswer): void {
    const why = answer.kind === 'refused' ? answer.message : answer.kind === 'silent' && answer.gaveUp ? `no answer: ${answer.why}` : null
    if (why === null || this.warned.has(node)) return
    this.warned.add(node)
    this.warn(`${node}: ${why}`)
  }

  private startTimeout(settings: RolloutSettings): number {
    return this.options.replyTimeout ?? (settings.fetch ? 120 : 30)
  }

  private starts(answers: Map<string, SshAnswer>): Record<string, StartAnswer> {
    const starts: Record<string, StartAnswer> = {}
    for (const [node, answer] of answers) {
      if (answer.kind === 'silent') continue
      if (answer.kind === 'refused') {
        starts[node] = {exitCode: ExitCode.noPerm, busy: false, message: answer.message}
        continue
      }

      const {json, exitCode} = answer
      const error = failure(json) ?? {}
      const runId = json ? str(json.id) : null
      if (exitCode === 0 && runId !== null && !failure(json)) {
        starts[node] = {run: {runId, state: str(json!.state) ?? 'running', release: str(json!.release), startedAt: str(json!.startedAt)}}
      } else if (str(error.message) !== null) {
        starts[node] = {exitCode: num(error.exitCode) ?? exitCode, busy: error.code === 'locked', message: stripVTControlCharacters(str(error.message)!).split('\n')[0]}
      } else {
        const detail = answer.said || (exitCode === 127 ? `${this.options.localpuppet}: command not found` : '')
        starts[node] = {exitCode: exitCode === 0 ? 1 : exitCode, busy: false, message: `localpuppet exited ${exitCode} without a JSON answer${detail ? `: ${detail}` : ''}`}
      }
    }

    return starts
  }
}

/** The flags apply and rollback share. */
function runFlags(settings: RolloutSettings): string[] {
  return [...(settings.noop ? ['--noop'] : []), ...(settings.save ? ['--save'] : []), ...(settings.timeoutSeconds === null ? [] : ['--timeout', String(settings.timeoutSeconds)])]
}
