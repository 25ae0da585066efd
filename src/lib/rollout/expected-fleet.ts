import {readFile} from 'node:fs/promises'
import {join} from 'node:path'

import {NotFoundError, UsageError} from '../errors.js'
import {writeFileAtomic} from '../util/atomic-write.js'
import {stringifyJson} from '../util/json.js'
import {compareNatural} from '../util/natural-order.js'
import {terminalText} from '../util/terminal-text.js'
import type {NodeReport} from './engine.js'
import {readRolloutsFile} from './record.js'
import {type FleetTransport, NODE_NAME as IDENTITY} from './transports/transport.js'


/** The fleet a rollout or fleet status expects, in natural name order (db2 before db10): a --nodes file (or nodes named with -I) says it; otherwise what discovery finds and what it found before. */
export async function expectedFleet(
  transport: Pick<FleetTransport, 'discover' | 'fleetKey' | 'nodesFile' | 'named' | 'listed'>,
  memoryDir: string,
  options: {allowUntrusted?: boolean; signal?: AbortSignal; warn(line: string): void},
): Promise<{expected: string[]; expectedFrom: string; answers: Record<string, NodeReport>; remember(): Promise<void>}> {
  const file = transport.nodesFile
  const found = await transport.discover(options.signal)
  const answers: Record<string, NodeReport> = {}
  for (const [node, report] of Object.entries(found)) {
    if (IDENTITY.test(node)) answers[node] = report
    else options.warn(`ignored a reply from "${terminalText(node, 80)}": not a node name`)
  }

  if (transport.listed) {
    const listed = transport.listed.nodes
    for (const node of Object.keys(answers)) if (!listed.includes(node)) delete answers[node]
    return {expected: [...listed].sort(compareNatural), expectedFrom: `${transport.listed.from} (${listed.length})`, answers, remember: async () => {}}
  }

  if (file !== null) {
    const text = await readFile(file, 'utf8').catch((error: NodeJS.ErrnoException) => {
      throw new NotFoundError(`--nodes ${file}: ${error.code === 'ENOENT' ? 'no such file' : error.message}`)
    })
    const listed = [...new Set(text.split('\n').map((line) => line.trim()).filter((line) => line !== '' && !line.startsWith('#')))]
    const bad = listed.find((name) => !IDENTITY.test(name))
    if (bad !== undefined) throw new UsageError(`--nodes ${file}: ${JSON.stringify(bad)} is not a node name`)
    for (const node of Object.keys(answers)) if (!listed.includes(node)) delete answers[node]
    return {expected: listed.sort(compareNatural), expectedFrom: `--nodes ${file} (${listed.length})`, answers, remember: async () => {}}
  }

  // Nodes named one by one (mco -I, not /regex/) are expected, like --nodes: a named node that
  // is down is "no answer", never left out (and never left out of the fleet remembered for the filters).
  const named = transport.named?.nodes ?? []
  if (named.length > 0 && transport.named?.only) {
    for (const node of Object.keys(answers)) if (!named.includes(node)) delete answers[node]
    const silent = named.filter((node) => !Object.hasOwn(answers, node))
    return {expected: [...named].sort(compareNatural), expectedFrom: `-I (${named.length}${silent.length > 0 ? `; ${silent.join(', ')} did not answer` : ''})`, answers, remember: async () => {}}
  }

  const key = transport.fleetKey
  const memory = await readFleetMemory(memoryDir, options.allowUntrusted)
  const before = memory[key]?.nodes.filter((node) => IDENTITY.test(node)) ?? []
  const discovered = Object.keys(answers)
  const missing = [...new Set([...before, ...named])].filter((node) => !discovered.includes(node))
  const expected = [...new Set([...discovered, ...missing])].sort(compareNatural)
  const expectedFrom = `discovery (${discovered.length})${missing.length > 0 ? ` and the nodes named with -I or found by the last discovery with these filters (${missing.join(', ')} did not answer now)` : ''}`
  return {
    expected,
    expectedFrom,
    answers,
    async remember() {
      memory[key] = {nodes: expected, at: new Date().toISOString()}
      await writeFleetMemory(memoryDir, memory)
    },
  }
}

/**
 * fleet.json: the nodes each discovery found last, so that a node that stops answering is
 * missed ("no answer") rather than silently left out of the next rollout or fleet status.
 */
export interface FleetMemory {
  [discovery: string]: {nodes: string[]; at: string}
}

export async function readFleetMemory(dir: string, allowUntrusted = false): Promise<FleetMemory> {
  const bytes = await readRolloutsFile(join(dir, 'fleet.json'), 'fleet record', 64 * 1024 * 1024, allowUntrusted)
  try {
    const parsed = bytes === null ? null : (JSON.parse(bytes.toString('utf8')) as unknown)
    return parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed) ? (parsed as FleetMemory) : {}
  } catch (error) {
    if (error instanceof SyntaxError) return {}
    throw error
  }
}

export async function writeFleetMemory(dir: string, memory: FleetMemory): Promise<void> {
  await writeFileAtomic(join(dir, 'fleet.json'), stringifyJson(memory, 2), 0o600)
}
