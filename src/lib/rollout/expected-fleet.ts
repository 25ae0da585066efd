import {readFile} from 'node:fs/promises'
import {join} from 'node:path'

import {DamagedRecordError, NotFoundError, UsageError} from '../errors.js'
import {writeFileAtomic} from '../util/atomic-write.js'
import {readBoundedFile} from '../util/bounded-read.js'
import {stringifyJson} from '../util/json.js'
import {compareNatural} from '../util/natural-order.js'
import {terminalText} from '../util/terminal-text.js'
import {openedFileTrustProblem, refuseUnlessAllowed} from '../util/trusted-path.js'
import type {NodeReport} from './engine.js'
import type {FleetTransport} from './transports/transport.js'

/** An identity a transport may report that is safe in a nodes file and a `runs=` argument. */
const IDENTITY = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,252}$/

/** The fleet a rollout or fleet status expects, in natural name order (db2 before db10): a --nodes file says it; otherwise what discovery finds and what it found before. */
export async function expectedFleet(
  transport: Pick<FleetTransport, 'discover' | 'fleetKey' | 'nodesFile'>,
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

  const key = transport.fleetKey
  const memory = await readFleetMemory(memoryDir, options.allowUntrusted)
  const before = memory[key]?.nodes.filter((node) => IDENTITY.test(node)) ?? []
  const discovered = Object.keys(answers)
  const missing = before.filter((node) => !discovered.includes(node))
  const expected = [...new Set([...discovered, ...missing])].sort(compareNatural)
  const expectedFrom = `discovery (${discovered.length})${missing.length > 0 ? ` and the last one with these filters (${missing.join(', ')} did not answer now)` : ''}`
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
  const path = join(dir, 'fleet.json')
  try {
    const bytes = await readBoundedFile(path, {
      maxBytes: 64 * 1024 * 1024,
      label: `fleet record ${path}`,
      noFollow: true,
      error: (message) => new DamagedRecordError(message),
      inspect: (info) => refuseUnlessAllowed(openedFileTrustProblem(path, info, 'fleet record'), {overridable: true, allow: allowUntrusted}),
    })
    const parsed = JSON.parse(bytes.toString('utf8')) as unknown
    return parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed) ? (parsed as FleetMemory) : {}
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT' || error instanceof SyntaxError) return {}
    throw error
  }
}

export async function writeFleetMemory(dir: string, memory: FleetMemory): Promise<void> {
  await writeFileAtomic(join(dir, 'fleet.json'), stringifyJson(memory, 2), 0o600)
}
