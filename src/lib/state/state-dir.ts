import {statSync} from 'node:fs'
import {homedir} from 'node:os'
import {join, resolve} from 'node:path'

import {InputError, describeFsError} from '../errors.js'
import {displayPath} from '../util/shell-quote.js'
import {type TrustOptions, assertTrustedPaths} from '../util/trusted-path.js'

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

/**
 * The state dir and its runs dir, as trust checks them: whoever can write there can forge
 * a record, an ENC or a cache that root then believes.
 */
export function stateDirTrustPaths(stateDir: string): Array<{path: string} & TrustOptions> {
  const dir = resolve(stateDir)
  return [
    {path: dir, what: 'state directory'},
    {path: runsDir(dir), what: 'state directory', below: dir},
  ]
}

/**
 * Before anything read from the state dir is believed (status, history, log): refuses
 * (UntrustedPathError, 77) a state dir another user owns or others can write, unless
 * `allow` (--allow-untrusted); returns the problems allowed.
 */
export function assertTrustedStateDir(stateDir: string, allow = false): string[] {
  const untrusted = assertTrustedPaths(stateDirTrustPaths(stateDir), allow)
  assertStateDirShape(stateDir)
  return untrusted
}

/**
 * A state dir (or its runs/) that cannot be one: a file, a path through a file, links that
 * loop. 65 naming it, rather than an error at the first mkdir or readdir. Not there yet is
 * fine: it is made when a run needs it.
 */
export function assertStateDirShape(stateDir: string): void {
  for (const path of [stateDir, runsDir(stateDir)]) {
    let info
    try {
      info = statSync(path)
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code
      if (code === 'ENOENT') return
      if (code === 'ENOTDIR') throw new InputError(`state directory ${displayPath(stateDir)}: a file is on its path, where a directory should be`)
      if (code === 'ELOOP') throw new InputError(`state directory ${displayPath(stateDir)}: too many levels of symbolic links`)
      throw describeFsError(error, `state directory ${displayPath(stateDir)}`)
    }

    if (!info.isDirectory()) throw new InputError(`state directory ${displayPath(path)}: not a directory`)
  }
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
