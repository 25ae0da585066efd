import {spawnSync} from 'node:child_process'

/** Whether farm-bench (this workplace's whole-process timer) is on PATH. */
export const haveFarmBench = (): boolean => spawnSync('sh', ['-c', 'command -v farm-bench'], {stdio: 'ignore'}).status === 0

/** farm-bench's paired whole-process timing of a shell command line against another (or alone), its table printed. */
export function farmBench(a: string, b: string | null, rounds: number): void {
  const versus = b === null ? [] : ['--vs', `sh -c '${b}'`]
  const result = spawnSync('farm-bench', ['-n', String(rounds), '--timeout', '1200', ...versus, '--', 'sh', '-c', a], {encoding: 'utf8'})
  if (result.error) throw new Error(`farm-bench: ${result.error.message} (this bench times whole processes with farm-bench)`)
  console.log(result.stdout.trim())
  if (result.status !== 0) console.log(result.stderr.trim())
}
