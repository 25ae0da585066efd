import {homedir} from 'node:os'
import {join} from 'node:path'

/**
 * The default state directory: /var/lib/localpuppet for root, otherwise
 * $XDG_STATE_HOME/localpuppet or ~/.local/state/localpuppet.
 */
export function defaultStateDir(env: NodeJS.ProcessEnv = process.env, uid = process.getuid?.() ?? -1): string {
  if (uid === 0) return '/var/lib/localpuppet'
  const xdg = env.XDG_STATE_HOME
  if (xdg && xdg.startsWith('/')) return join(xdg, 'localpuppet')
  return join(env.HOME || homedir(), '.local', 'state', 'localpuppet')
}

export function runsDir(stateDir: string): string {
  return join(stateDir, 'runs')
}

export function runDir(stateDir: string, runId: string): string {
  return join(runsDir(stateDir), runId)
}

/** The files of one run, all inside its directory. */
export interface RunFiles {
  dir: string
  record: string
  log: string
  encScript: string
  encYaml: string
  summary: string
  report: string
  environmentPath: string
  emptyManifest: string
}

export function runFiles(stateDir: string, runId: string): RunFiles {
  const dir = runDir(stateDir, runId)
  return {
    dir,
    record: join(dir, 'run.json'),
    log: join(dir, 'puppet.log'),
    encScript: join(dir, 'enc'),
    encYaml: join(dir, 'enc.yaml'),
    summary: join(dir, 'last_run_summary.yaml'),
    report: join(dir, 'last_run_report.yaml'),
    environmentPath: join(dir, 'environments'),
    emptyManifest: join(dir, 'empty.pp'),
  }
}

/** The copy of the manifest a run applied, kept for --replay (not part of the plan's files: puppet never reads it). */
export function manifestCopyPath(stateDir: string, runId: string): string {
  return join(runDir(stateDir, runId), 'manifest.pp')
}
