import {readdir, rm} from 'node:fs/promises'
import {InputError} from '../errors.js'
import {join} from 'node:path'

import {readBoundedFile} from '../util/bounded-read.js'
import {asIoError} from '../util/io-error.js'
import type {RunRecord} from '../state/run-record.js'
import {runFiles} from '../state/state-dir.js'
import {type PuppetDbCommand, PuppetDbClient, puppetDbConfig} from './client.js'
import {flushSpool, spoolCommands} from './spool.js'
import {type RunStamp, catalogCommand, factsCommand, reportCommand} from './wire.js'

/** What the end of an attempt gives sending: the whole of it is this long at most (ms). */
export const AFTER_RUN_DEADLINE_MS = 5_000
/** Each exchange with PuppetDB after a run: connecting, the header, a pause (ms). */
export const AFTER_RUN_TIMEOUT_MS = 2_000

/** The states whose report goes to PuppetDB: every attempt that tried to apply something. A skipped run (--if-changed) applied nothing new, a busy one was never the node's. */
const SENT_STATES = new Set(['succeeded', 'failed', 'error', 'interrupted', 'refused'])

/** The largest file of Puppet's read for a command. */
const MAX_PUPPET_FILE = 128 * 1024 * 1024

/** Where Puppet caches facts and the catalog in a run's directory (client_datadir), when PuppetDB is configured. */
export function clientDataDir(runDir: string): string {
  return join(runDir, 'client_data')
}

/** The routes file that makes `puppet apply` keep the facts it found (the json cache): PuppetDB's replace facts. */
export const ROUTES_YAML = 'apply:\n  facts:\n    terminus: facter\n    cache: json\n'

/**
 * After an attempt, with the puppetdb setting: the run's report, facts and catalog are made
 * into PuppetDB commands, spooled, and the spool is sent in order, for AFTER_RUN_DEADLINE_MS
 * at most. Never throws: PuppetDB down, slow or refusing leaves the commands spooled for the
 * next run or `report flush`, and returns a warning.
 */
export async function sendRunToPuppetDb(stateDir: string, moduleDir: string, record: RunRecord | null): Promise<string | null> {
  if (!record || !SENT_STATES.has(record.state)) return null
  try {
    const config = await puppetDbConfig()
    if (!config) return null
    let dropped: number
    try {
      dropped = await spoolCommands(stateDir, await runCommands(stateDir, moduleDir, record))
    } finally {
      // Puppet's catalog cache holds Sensitive values in clear (the commands do not): not kept past the run, spooled or not.
      await rm(clientDataDir(runFiles(stateDir, record.id).dir), {recursive: true, force: true})
    }

    const client = new PuppetDbClient(config)
    const flushed = await flushSpool(stateDir, client, {deadlineMs: AFTER_RUN_DEADLINE_MS, timeoutMs: AFTER_RUN_TIMEOUT_MS})
    const refused = flushed.refused.length > 0 ? `; PuppetDB refused ${flushed.refused.length} command(s), dropped: ${flushed.refused.join('; ')}` : ''
    const lost = (dropped > 0 ? `; the spool was full: ${dropped} oldest report(s) dropped` : '') + refused
    if (flushed.busy) return `puppetdb: ${flushed.pending} command(s) spooled for later: ${flushed.error}${lost}`
    if (flushed.error) return `puppetdb: ${flushed.pending} command(s) spooled for later (localpuppet report flush): ${flushed.error}${lost}`
    return lost ? `puppetdb${lost}` : null
  } catch (error) {
    // A full disk (or another I/O failure) said in a line of our own, not Node's: nothing of this run was spooled, what was spooled before is kept.
    const io = asIoError(error, 'PuppetDB spool')
    return io
      ? `puppetdb: this run's report was not spooled, it is lost (PuppetDB will not have it): ${io.message}; what was spooled before is kept`
      : `puppetdb: this run's report was not spooled: ${(error as Error).message}`
  }
}

/** The commands of one attempt: facts and catalog when Puppet left them, then the report (Puppet's, or the attempt's own). */
export async function runCommands(stateDir: string, moduleDir: string, record: RunRecord, now = new Date()): Promise<PuppetDbCommand[]> {
  const files = runFiles(stateDir, record.id)
  const [{nodeIdentity}, {readRecordHead}] = await Promise.all([import('../config/node-identity.js'), import('../install/install-record.js')])
  const {node} = await nodeIdentity()
  let digest: string | null = null
  try {
    digest = record.release ? (readRecordHead(moduleDir, record.release)?.digest ?? null) : null
  } catch {
    // A damaged record was the run's refusal already; the release alone names the code.
  }

  const stamp: RunStamp = {
    certname: node,
    codeId: record.release ? (digest ? `${record.release}@${digest}` : record.release) : (record.ref ?? 'unknown'),
    runId: record.id,
    release: record.release ?? record.ref ?? 'unknown',
    ref: record.ref,
    inputDigest: record.inputDigest || null,
    puppet: {implementation: record.puppet?.implementation ?? null, version: record.puppet?.version ?? null},
    state: record.state,
    noop: record.noop,
    environment: record.environment || 'production',
    startedAt: record.startedAt,
    finishedAt: record.finishedAt ?? now.toISOString(),
    error: record.error,
    firstError: record.firstError ?? null,
    correctiveChange: record.resources?.correctiveChange ?? null,
    corrected: record.corrected?.resources ?? [],
    producedAt: now.toISOString(),
  }
  const report = await readPuppetYaml(files.report)
  const cache = clientDataDir(files.dir)
  const [facts, catalog] = await Promise.all([readCached(join(cache, 'facts')), readCached(join(cache, 'catalog'))])
  const commands: PuppetDbCommand[] = []
  if (facts) commands.push(factsCommand(facts, stamp))
  const transactionUuid = report && typeof report.transaction_uuid === 'string' ? report.transaction_uuid : null
  if (catalog) commands.push(catalogCommand(catalog, stamp, transactionUuid))
  commands.push(reportCommand(report, stamp))
  return commands
}

async function readPuppetYaml(path: string): Promise<Record<string, unknown> | null> {
  let bytes: Buffer
  try {
    bytes = await readBoundedFile(path, {maxBytes: MAX_PUPPET_FILE, label: `Puppet's report ${path}`, error: (message) => new InputError(message)})
  } catch {
    return null
  }

  const {parseDocument} = await import('yaml')
  // Puppet tags its report !ruby/object:Puppet::Transaction::Report; its data is plain YAML.
  const doc = parseDocument(bytes.toString('utf8').replace(/^--- !ruby\/object:\S+/, '---'), {uniqueKeys: false, prettyErrors: false})
  if (doc.errors.length > 0) return null
  const data = doc.toJS({maxAliasCount: 1000}) as unknown
  return data !== null && typeof data === 'object' && !Array.isArray(data) ? (data as Record<string, unknown>) : null
}

/** The one JSON file Puppet cached in a directory (facts/NAME.json, catalog/NAME.json), or null. */
async function readCached(dir: string): Promise<Record<string, unknown> | null> {
  const names = (await readdir(dir).catch(() => [] as string[])).filter((name) => name.endsWith('.json'))
  if (names.length !== 1) return null
  try {
    const data = JSON.parse((await readBoundedFile(join(dir, names[0]), {maxBytes: MAX_PUPPET_FILE, label: join(dir, names[0]), error: (message) => new InputError(message)})).toString('utf8')) as unknown
    return data !== null && typeof data === 'object' && !Array.isArray(data) ? (data as Record<string, unknown>) : null
  } catch {
    return null
  }
}
