/**
 * status with a full history (100 run records, --keep's default, and a refused newest
 * attempt) vs `node -e 0`: status now reads every record to find the run in progress or the
 * last attempt, and the last completed run. Also status --check, and writing the metrics file
 * (apply's after-attempt step) measured as a refused apply with and without --metrics-file.
 */
import {spawnSync} from 'node:child_process'
import {mkdirSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'

export function statusBench(bin: string, dir: string, rounds: number): void {
  const state = join(dir, 'status-state')
  for (let i = 0; i < 100; i++) {
    const id = `20261122T${String(100000 + i).padStart(6, '0')}.000Z-${i.toString(16).padStart(4, '0')}`
    mkdirSync(join(state, 'runs', id), {recursive: true})
    const at = new Date(Date.UTC(2026, 10, 22, 10, 0, i)).toISOString()
    const record = {id, state: i === 99 ? 'refused' : 'succeeded', release: 'web/tags/1.0.0', ref: 'web/tags/1.0.0', modulepath: [], input: {source: 'input.yaml', document: {app: 'web/tags/1.0.0', classes: ['web']}},
      inputDigest: '', noop: false, allowMutable: false, mutableEntries: [], facts: {}, environment: 'production', manifest: '', command: ['puppet'], pid: 1, startedAt: at, finishedAt: at, durationMs: 3000,
      exitCode: i === 99 ? 66 : 0, puppetExitCode: 0, resources: {changed: 0, failed: 0, outOfSync: 0, total: 10}, error: null, reason: null, fingerprint: null, splaySeconds: null, log: 'x'}
    writeFileSync(join(state, 'runs', id, 'run.json'), JSON.stringify(record, null, 2))
  }

  const run = (file: string, args: string[]) => {
    const start = process.hrtime.bigint()
    spawnSync(file, args, {stdio: 'ignore', env: {...process.env, LOCALPUPPET_PUPPET: '/nonexistent/puppet'}})
    return Number(process.hrtime.bigint() - start) / 1e6
  }

  const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]
  const cases: Array<[string, string[]]> = [
    ['status', [bin, 'status', '--state-dir', state]],
    ['status --json', [bin, 'status', '--state-dir', state, '--json']],
    ['status --check', [bin, 'status', '--state-dir', state, '--check']],
  ]
  for (const [name, args] of cases) {
    const a: number[] = []
    const b: number[] = []
    for (let i = 0; i < rounds; i++) {
      a.push(run('node', args))
      b.push(run('node', ['-e', '0']))
    }

    console.log(`${`${name} / node`.padEnd(16)} ${median(a).toFixed(0).padStart(6)} ms / ${median(b).toFixed(0).padStart(6)} ms = ${(median(a) / median(b)).toFixed(2)}  (100 records; median of ${rounds} each)`)
  }
}
