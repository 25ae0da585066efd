import {execFileSync, spawnSync} from 'node:child_process'

/** The unprivileged user the trust tests attack as (created once, kept: useradd is slow and shared). */
export const HOSTILE_USER = 'lp-hostile'

/**
 * The hostile user's uid, creating the user if needed; null when this process is not root
 * (CI runs as root; a developer's unprivileged run skips these tests).
 */
export function hostileUid(): number | null {
  if (process.geteuid?.() !== 0) return null
  const probe = spawnSync('id', ['-u', HOSTILE_USER], {encoding: 'utf8'})
  if (probe.status !== 0) {
    // Exit 9: another test process created it meanwhile.
    const made = spawnSync('useradd', ['--system', '--no-create-home', '--shell', '/usr/sbin/nologin', HOSTILE_USER], {encoding: 'utf8'})
    if (made.status !== 0 && made.status !== 9) throw new Error(`useradd ${HOSTILE_USER}: ${made.stderr}`)
  }

  return Number(execFileSync('id', ['-u', HOSTILE_USER], {encoding: 'utf8'}).trim())
}

/** Runs a shell command as the hostile user; throws if it fails (the attack must succeed to count). */
export function asHostile(script: string): string {
  return execFileSync('runuser', ['-u', HOSTILE_USER, '--', '/bin/sh', '-c', script], {encoding: 'utf8'})
}
